"""Resources by stack and type: a signal batch reads its stacks' random strings (their secret texts).

Revision 0013, after 0012. ``ix_resources_stack_type`` on (stack_id, type): without it, each
signal batch's read of a stack's ``OS::Heat::RandomString`` resources (documents/seal.py
``stack_texts``) scanned every resource of the stack, 60,000 in a 50,000-deployment stack.
"""

from __future__ import annotations

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_resources_stack_type", "resources", ["stack_id", "type"], unique=False)
