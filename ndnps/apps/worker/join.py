"""A worker joining a training, step 3 from its side: fetching its training content from the
PS that offered the task (spec, hyper-parameters, its shard's place, the current parameters).

A fetch that fails for want of answers (the PS that offered the task died: a restarted one
makes the content again when it re-offers it) starts again, for the worker's patience in all,
as the job waits for a silent PS later on; Data that fails validation, or content that fails
to decode three times, ends the job at once.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable, Protocol

import numpy as np

from ndnps.client.fetcher import FetchError, SegmentFetcher
from ndnps.protocol import messages, names
from ndnps.protocol.codec import CodecError, MixedSegments

log = logging.getLogger("worker")

# a content fetch that failed for want of answers starts again for this long after the task
# was accepted, every CONTENT_RETRY: the training's ps_timeout, read from --config or given as
# --content-patience (the PS's own knobs come only with the content); this default otherwise
CONTENT_PATIENCE = 60.0
CONTENT_RETRY = 0.5
# The PS holds a content Interest while it assigns the tasks, so it may wait, and its round
# trip measures nothing; but once the content exists a lost Interest (or its Data) waits out
# its lifetime: 2 s held, when it was fixed, made a join, and the whole training's start, 2 s
# late; doubling per loss to 0.8 s, the start at 20 % loss waited 1-3 s.  So a fetch keeps
# its first lifetime (polling the PS while it assigns), and only a fetch that failed
# altogether starts the next with twice it (a path slower than CONTENT_LIFETIME), at most
# CONTENT_MAX_LIFETIME
CONTENT_LIFETIME, CONTENT_MAX_LIFETIME = 0.05, 0.8


class JobFailed(Exception):
    """This training cannot go on for this worker (the message says why)."""


class ContentCounters(Protocol):
    """The join's share of the worker's counters (the worker's dataclass has these fields)."""
    content_retries: int
    mixed_objects: int
    malformed: int


async def fetch_content(fetcher: SegmentFetcher, ps: str, train: str, gpu: str,
                        patience: float, counters: ContentCounters,
                        setup: Callable[[np.ndarray, dict], None]) -> None:
    """Fetch our training content and hand it to `setup` (whose decoding errors count as
    malformed content, fetched again)."""
    def name_of(s: int):
        return names.content(ps, train, gpu, s)

    clock = asyncio.get_running_loop().time      # the clock of the fetch's own timers
    deadline = clock() + patience
    malformed = 0
    lifetime = CONTENT_LIFETIME
    while True:
        rejected = fetcher.stats.rejected
        try:
            # two answers failing the signature check (the second asked MustBeFresh, so not a
            # forged copy in a cache): the PS signs with another key
            parts = await asyncio.wait_for(
                fetcher.fetch(name_of, first_lifetime=lifetime, first_tries=17, fresh=True,
                              max_rejected=2),
                max(0.0, deadline - clock()))
        except asyncio.TimeoutError:
            raise JobFailed(f"no training content within {patience:g} s") from None
        except FetchError as e:
            if fetcher.stats.rejected > rejected:
                raise JobFailed(
                    f"the training content's signatures failed to verify "
                    f"({fetcher.stats.rejected - rejected} Data rejected): this worker's key "
                    f"(--key, or training.key in --config) may differ from the PS's; {e}"
                ) from None
            if clock() >= deadline:
                raise JobFailed(f"no training content: {e}") from None
            lifetime = min(2 * lifetime, CONTENT_MAX_LIFETIME)
            counters.content_retries += 1
            log.warning("no training content yet (%s); asking again", e)
            await asyncio.sleep(fetcher.bounded(CONTENT_RETRY))
            continue
        try:
            vec, info = messages.parse_content(b"".join(parts))
            setup(vec, info)
            return
        except messages.Refused as e:
            raise JobFailed(f"the PS did not take us: {e}") from None
        except MixedSegments as e:
            # the PS that made the first segments died and a new one made the rest: not
            # malformed, and the next fetch has one PS's (within our patience)
            counters.mixed_objects += 1
            if clock() >= deadline:
                raise JobFailed(f"no whole training content: {e}") from None
            log.warning("training content from two PS incarnations; refetching")
        except (CodecError, ValueError, KeyError, TypeError) as e:
            counters.malformed += 1
            malformed += 1
            if malformed == 3:
                raise JobFailed("training content malformed three times") from None
            log.warning("malformed training content (%s); refetching", e)


async def refetch_content(fetcher: SegmentFetcher, ps: str, train: str,
                          gpu: str) -> tuple[np.ndarray, dict]:
    """The content again (a resync: the PS re-offered our task), a few tries; raises
    FetchError or a decoding error."""
    parts = await fetcher.fetch(lambda s: names.content(ps, train, gpu, s),
                                first_lifetime=CONTENT_LIFETIME, first_tries=7, fresh=True)
    return messages.parse_content(b"".join(parts))
