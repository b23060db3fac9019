"""The LOCAL transport's courier: the test carries a server's documents onto its agent's media and its signals back."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from tests.support.controlplane import ControlPlane


@dataclass(frozen=True)
class Media:
    """Where a LOCAL control plane publishes documents, and where its local agents read them and write signals."""

    published: Path
    media: Path
    outbox: Path

    @classmethod
    def under(cls, tmp: Path) -> Media:
        """The three directories under *tmp* (the media one made: the agents read it from the start)."""
        local = cls(tmp / "published", tmp / "media", tmp / "outbox")
        local.media.mkdir()
        return local

    def serve_args(self) -> list[str]:
        """`anneal serve` arguments: LOCAL documents into *published*, local agents on *media* and *outbox*."""
        return [
            f"--local-dir={self.published}",
            "--store-poll-interval=0.5",
            f"--agent-arg=--media-dir={self.media}",
            f"--agent-arg=--signal-dir={self.outbox}",
        ]

    def document(self, server_id: str) -> Path:
        """The document file the control plane publishes for *server_id*."""
        return self.published / server_id / "document.json"

    def carry(self, cp: ControlPlane, server_id: str) -> None:
        """One trip: the newest document onto the media, the agent's signals back (`anneal signal import`)."""
        if self.document(server_id).exists():
            shutil.copyfile(self.document(server_id), self.media / "document.json")
        if self.outbox.exists() and any(self.outbox.iterdir()):
            cp.cli("signal", "import", str(self.outbox))
