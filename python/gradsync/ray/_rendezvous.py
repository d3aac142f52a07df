# SPDX-License-Identifier: Apache-2.0
"""Where a Ray collective group's communicator meets: rank 0's "host:port" for one epoch,
agreed through Ray's internal key-value store (the GCS's, in the namespace "gradsync").

Ray hands a backend only (world_size, rank, group_name), nothing fresh that every rank
shares, so each creation of a group is an epoch that rank 0 names with a random nonce. The
keys start with ``ray/<job>/<group>/``, <job> the Ray job id of the actors (the driver's),
so that jobs sharing a cluster each have their own "default" group:

- rank 0 draws the epoch E (uuid4), picks a free TCP port on its host and puts
  ``.../epoch/<E>/addr`` = "host:port", then ``.../epoch`` = E (the pointer), then
  ``.../rank/0`` = E.
- rank r > 0 polls the pointer until it names an epoch E whose address key exists and
  that differs from ``.../rank/<r>``, the last epoch this rank of the group joined; it
  then records E there.
- rank 0 deletes the address key once its gs_comm_init has returned (every rank has then
  read it) or failed.

A group destroyed and created again under the same name thus never reads the old address:
the old epoch's address key is gone, and even when it is not (rank 0 died before deleting
it) every rank that joined the old epoch skips it. The epoch is also in the communicator's
job_id, which gradsync checks in every handshake, so a rank still holding an old address
is refused. Every wait has a deadline (timeout_ms) and a bounded number of polls.
"""
from __future__ import annotations

import hashlib
import socket
import time
import uuid
from typing import Optional, Tuple

NAMESPACE = "gradsync"
_POLL_FIRST_S = 0.02
_POLL_MAX_S = 0.25


def _kv() -> object:
    """Ray's internal KV, checked to be usable (inside ray.init or a Ray worker)."""
    from ray.experimental import internal_kv
    if not internal_kv._internal_kv_initialized():
        raise RuntimeError("gradsync Ray backend: Ray's key-value store is not connected; "
                           "create the group inside a Ray actor or task after ray.init()")
    return internal_kv


def scope() -> str:
    """The Ray job id of this process (a driver's or its actors'), hex."""
    import ray
    return str(ray.get_runtime_context().get_job_id())


def epoch_key(job: str, group: str) -> str:
    """The key of the pointer to the current epoch of @group in Ray job @job."""
    return "ray/%s/%s/epoch" % (job, group)


def addr_key(job: str, group: str, epoch: str) -> str:
    """The key of rank 0's "host:port" in @epoch of @group."""
    return "ray/%s/%s/epoch/%s/addr" % (job, group, epoch)


def rank_key(job: str, group: str, rank: int) -> str:
    """The key of the last epoch of @group that @rank joined."""
    return "ray/%s/%s/rank/%d" % (job, group, rank)


def job_id(group: str, epoch: str) -> str:
    """The communicator's job_id for @epoch of @group (at most 256 bytes, any group name)."""
    return "ray-%s-%s" % (hashlib.sha256(group.encode()).hexdigest()[:16], epoch)


def _get(kv: object, key: str) -> Optional[str]:
    value = kv._internal_kv_get(key, namespace=NAMESPACE)  # type: ignore[attr-defined]
    return value.decode() if value is not None else None


def _put(kv: object, key: str, value: str) -> None:
    kv._internal_kv_put(key, value, overwrite=True,  # type: ignore[attr-defined]
                        namespace=NAMESPACE)


def free_port(host: str) -> int:
    """A TCP port free on @host now (gradsync's rank 0 listens on it soon after)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, 0))
        return int(s.getsockname()[1])


def publish(group: str, host: str) -> Tuple[str, int, str]:
    """Rank 0: a new epoch of @group at a free port of @host. Returns (epoch, port, key of
    the address, which the caller deletes with withdraw() once the communicator exists)."""
    kv = _kv()
    job = scope()
    epoch = uuid.uuid4().hex
    port = free_port(host)
    akey = addr_key(job, group, epoch)
    _put(kv, akey, "%s:%d" % (host, port))
    _put(kv, epoch_key(job, group), epoch)
    _put(kv, rank_key(job, group, 0), epoch)
    return epoch, port, akey


def withdraw(key: str) -> None:
    """Delete an epoch's address key (rank 0, after its init returned or failed)."""
    try:
        _kv()._internal_kv_del(key, namespace=NAMESPACE)  # type: ignore[attr-defined]
    except Exception:  # Ray shutting down: the key goes with the cluster
        pass


def lookup(group: str, rank: int, timeout_ms: int) -> Tuple[str, str, int]:
    """Rank @rank > 0: wait up to @timeout_ms for a new epoch of @group; returns (epoch,
    host, port). TimeoutError names the group and the key when rank 0 does not publish."""
    kv = _kv()
    job = scope()
    ekey, rkey = epoch_key(job, group), rank_key(job, group, rank)
    joined = _get(kv, rkey)  # the epoch this rank of the group joined last, if any
    deadline = time.monotonic() + timeout_ms / 1000.0
    max_polls = int(timeout_ms / 1000.0 / _POLL_FIRST_S) + 2
    delay = _POLL_FIRST_S
    seen = None
    for _ in range(max_polls):
        epoch = _get(kv, ekey)
        if epoch and epoch != joined:
            seen = epoch
            value = _get(kv, addr_key(job, group, epoch))
            if value:
                host, _, port = value.rpartition(":")
                _put(kv, rkey, epoch)
                return epoch, host, int(port)
        if time.monotonic() >= deadline:
            break
        time.sleep(delay)
        delay = min(delay * 2, _POLL_MAX_S)
    if seen is None and joined is not None:
        state = "it still names epoch %s, which this rank joined before" % joined
    elif seen is None:
        state = "it was never set"
    else:
        state = "it names epoch %s, whose address key %s is gone" % (
            seen, addr_key(job, group, seen))
    raise TimeoutError(
        "gradsync Ray backend: rank %d of group %r waited %d ms for rank 0 to publish a new "
        "epoch under the key %r (namespace %r) and %s. Start rank 0 of the group (every rank "
        "must call init_collective_group, or take part in create_collective_group; actors "
        "of another Ray job do not see this job's groups), or raise GS_TIMEOUT_MS"
        % (rank, group, timeout_ms, ekey, NAMESPACE, state))
