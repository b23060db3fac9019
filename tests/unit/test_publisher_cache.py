"""The HTTP publisher keeps every server's serial but only the newest documents' bytes (issue 20).

The real HttpPublisher (control/documents/publish.py) with a cache of two documents: what left
the cache still answers an ETag comparison, a render of the same serial puts it back with the
time it was first published, and a long-poll is handed its document even when the cache drops
it right away. A publish that wakes long-polls lets the engine go on once they answered (`answered`).
The control plane's side (a fetch that renders again) is in
tests/integration/test_big_stack_reads.py.
"""

from __future__ import annotations

import asyncio

from control.documents.publish import HttpPublisher


async def test_bytes_past_the_cache_leave_but_the_serial_stays() -> None:
    """Three servers through a cache of two: the oldest's bytes are gone, its ETag is not."""
    publisher = HttpPublisher(cache=2)
    for server in ("a", "b", "c"):
        await publisher.publish(server, 1, f"doc {server}".encode())
    assert publisher.get("a") is None and publisher.etag("a") == '"1"'
    found = publisher.get("c")
    assert found is not None and found.body == b"doc c" and found.etag == '"1"'


async def test_the_same_serial_rendered_again_comes_back_with_its_first_time() -> None:
    """a's serial 1 rendered again after it left: its bytes are served, published-at unchanged."""
    publisher = HttpPublisher(cache=1)
    await publisher.publish("a", 1, b"first")
    first = publisher.get("a")
    assert first is not None
    await publisher.publish("b", 1, b"b")
    await publisher.publish("a", 1, b"again")
    again = publisher.get("a")
    assert again is not None and again.body == b"again" and again.at == first.at
    await publisher.publish("a", 1, b"ignored")  # cached: an equal serial changes nothing
    assert (publisher.get("a") or again).body == b"again"


async def test_an_older_serial_never_replaces_a_newer_one() -> None:
    """Serial 2 then a slower render of serial 1: the ETag stays at 2."""
    publisher = HttpPublisher(cache=1)
    await publisher.publish("a", 2, b"two")
    await publisher.publish("b", 1, b"b")
    await publisher.publish("a", 1, b"one")
    assert publisher.etag("a") == '"2"' and publisher.get("a") is None


async def test_a_long_poll_gets_its_document_even_when_the_cache_drops_it() -> None:
    """Two waiters on a; a's new document is published and pushed out by b's at once: both get it."""
    publisher = HttpPublisher(cache=1)
    await publisher.publish("a", 1, b"one")
    waiters = [asyncio.create_task(publisher.wait_newer("a", '"1"', 10)) for _ in range(2)]
    await asyncio.sleep(0)
    await publisher.publish("a", 2, b"two")
    await publisher.publish("b", 1, b"b")
    found = await asyncio.gather(*waiters)
    assert [f.body if f else None for f in found] == [b"two", b"two"] and publisher.get("a") is None


async def test_a_long_poll_ends_unchanged_on_timeout_withdrawal_or_stop() -> None:
    """None after the timeout, when the server is withdrawn, and when the control plane stops."""
    publisher = HttpPublisher(cache=2)
    await publisher.publish("a", 1, b"one")
    await publisher.publish("b", 1, b"one")
    assert await publisher.wait_newer("a", '"1"', 0.01) is None
    withdrawn = asyncio.create_task(publisher.wait_newer("a", '"1"', 10))
    stopped = asyncio.create_task(publisher.wait_newer("b", '"1"', 10))
    await asyncio.sleep(0)
    await publisher.withdraw("a")
    assert publisher.release_waiters() == 1
    assert await withdrawn is None and await stopped is None and publisher.etag("a") is None


async def _hold(publisher: HttpPublisher, server: str, etag: str, log: list[str]) -> None:
    """A long-poll's request as the document handler holds it: answered once its document is in."""
    with publisher.answering(server):
        found = await publisher.wait_newer(server, etag, 3600)
        log.append(f"{server} answered {found.body.decode() if found else None}")


async def test_the_walk_goes_on_only_after_the_woken_long_polls_answered() -> None:
    """A publish wakes a's two long-polls: ``answered`` returns after both have their document."""
    publisher, log = HttpPublisher(), list[str]()
    await publisher.publish("a", 1, b"one")
    held = [asyncio.create_task(_hold(publisher, "a", '"1"', log)) for _ in range(2)]
    await asyncio.sleep(0)
    await publisher.publish("a", 2, b"two")
    await publisher.answered(3600)
    log.append("walk")
    assert log == ["a answered two", "a answered two", "walk"]
    await asyncio.gather(*held)


async def test_a_long_poll_no_publish_woke_does_not_hold_the_walk() -> None:
    """b's long-poll waits on while a's document is published: ``answered`` returns without waiting for b."""
    publisher, log = HttpPublisher(), list[str]()
    for server in ("a", "b"):
        await publisher.publish(server, 1, b"one")
    held = asyncio.create_task(_hold(publisher, "b", '"1"', log))
    await asyncio.sleep(0)
    await publisher.publish("a", 2, b"two")
    drained = asyncio.create_task(publisher.answered(3600))
    await asyncio.sleep(0)
    assert drained.done() and not held.done() and log == []
    held.cancel()
    await asyncio.gather(held, return_exceptions=True)


async def test_a_woken_long_poll_whose_client_left_releases_the_walk() -> None:
    """a's long-poll is woken, then its request is cancelled before answering: ``answered`` returns."""
    publisher, log = HttpPublisher(), list[str]()
    await publisher.publish("a", 1, b"one")
    held = asyncio.create_task(_hold(publisher, "a", '"1"', log))
    await asyncio.sleep(0)
    await publisher.publish("a", 2, b"two")
    drained = asyncio.create_task(publisher.answered(3600))
    held.cancel()
    await asyncio.gather(held, return_exceptions=True)
    await drained
    assert log == [] and held.cancelled()
