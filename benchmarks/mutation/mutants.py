# ruff: noqa: E501 (the snippets are source lines, kept whole to stay readable)
"""Hand-written semantic mutants of the reference models, ``gpu`` and ``vtime``.

Each mutant is one small source patch — a plausible bug, not a syntactic accident: an
off-by-one, a wrong comparison, a missing re-read, a lost reset, a wrong tie order. ``path`` is
relative to ``src/videoflow_aio``; ``original`` must occur exactly once in that file (the
harness refuses a mutant whose snippet is missing or ambiguous, so a refactor cannot turn one
into a silent no-op). IDs are stable: add new mutants at the end of their area.
"""

from __future__ import annotations

from dataclasses import dataclass

AREAS = ("messaging", "payload", "runtime_store", "allocation", "vtime")


@dataclass(frozen=True)
class Mutant:
    id: str
    area: str
    path: str
    original: str
    replacement: str
    description: str


_M = "memory/messaging/"
_P = "memory/payload/"

MUTANTS: tuple[Mutant, ...] = (
    # -- messaging ---------------------------------------------------------------------------
    Mutant(
        "msg-dedup-edge",
        "messaging",
        _M + "_channel.py",
        "while po and po[0][0] + window <= now:",
        "while po and po[0][0] + window < now:",
        "dedup: an id accepted exactly one window ago is still a duplicate",
    ),
    Mutant(
        "msg-max-deliver-off-by-one",
        "messaging",
        _M + "_leases.py",
        "if cap != -1 and attempt >= cap:",
        "if cap != -1 and attempt > cap:",
        "max_deliver: one delivery more than the cap",
    ),
    Mutant(
        "msg-retry-delay-past-cap",
        "messaging",
        _M + "_leases.py",
        "if delay > 0 and (cap == -1 or attempt < cap):",
        "if delay > 0 and (cap == -1 or attempt <= cap):",
        "Retry(delay) on the last allowed attempt schedules one more delivery",
    ),
    Mutant(
        "msg-renew-from-old-deadline",
        "messaging",
        _M + "_leases.py",
        "deadline = now + sub.spec.ack_wait_seconds\n        sub.leased[seq] = (lease[0], deadline",
        "deadline = lease[1] + sub.spec.ack_wait_seconds\n        sub.leased[seq] = (lease[0], "
        "deadline",
        "renew extends from the old deadline instead of from now",
    ),
    Mutant(
        "msg-renew-no-timer",
        "messaging",
        _M + "_leases.py",
        "        sub.push_timer(deadline, seq, lease[0], LEASE)\n",
        "",
        "renew forgets to schedule the new expiry: a renewed lease never expires",
    ),
    Mutant(
        "msg-new-before-redeliveries",
        "messaging",
        _M + "_leases.py",
        "        if sub.redeliver:\n            left = self._redeliver(sub, out, n, budget, deadline)\n"
        "        if left is not None and len(out) < n and sub.undelivered > 0:\n"
        "            left = self._deliver_new(sub, out, n, left, deadline)\n",
        "        if sub.undelivered > 0:\n            left = self._deliver_new(sub, out, n, budget, "
        "deadline)\n        if left is not None and len(out) < n and sub.redeliver:\n"
        "            left = self._redeliver(sub, out, n, left, deadline)\n",
        "new messages are leased before queued redeliveries",
    ),
    Mutant(
        "msg-floor-stuck-on-other-kind",
        "messaging",
        _M + "_subscription.py",
        "if m is None or not self.sees(m):",
        "if m is None:",
        "ack floor: a message the subscription does not see holds the floor",
    ),
    Mutant(
        "msg-byte-credit-exact",
        "messaging",
        _M + "_leases.py",
        "            if m.size > budget:\n                blocked = True",
        "            if m.size >= budget:\n                blocked = True",
        "byte credit: a message exactly the size of the credit is refused",
    ),
    Mutant(
        "msg-max-bytes-exact-evicts",
        "messaging",
        _M + "_channel.py",
        "if not full and not (max_bytes is not None and self.bytes + size > max_bytes):",
        "if not full and not (max_bytes is not None and self.bytes + size >= max_bytes):",
        "limits evict: a message that exactly fills max_bytes evicts the oldest",
    ),
    Mutant(
        "msg-settle-no-credit-wake",
        "messaging",
        _M + "_stream.py",
        "if sub.waiters and len(sub.leased) + 1 >= sub.spec.item_credit:",
        "if sub.waiters and len(sub.leased) >= sub.spec.item_credit:",
        "a settle that frees exhausted shared credit does not wake a waiting receive",
    ),
    Mutant(
        "msg-expiry-no-wake",
        "messaging",
        _M + "_subscription.py",
        "if waiters and due < waiters.earliest:",
        "if waiters and due > waiters.earliest:",
        "a lease expiring before a waiting receive's deadline does not wake it",
    ),
    Mutant(
        "msg-expiry-fires-late",
        "messaging",
        _M + "_leases.py",
        "if live and due > now:",
        "if live and due >= now:",
        "a lease due exactly now is not expired yet",
    ),
    Mutant(
        "msg-late-sub-floor",
        "messaging",
        _M + "_subscription.py",
        "self.floor = first - 1",
        "self.floor = first",
        "a subscription created on a non-empty channel starts its floor one too high",
    ),
    Mutant(
        "msg-retry-resets-attempt",
        "messaging",
        _M + "_leases.py",
        "        sub.attempts[seq] = attempt\n        cap = sub.spec.max_deliver\n"
        "        if delay > 0",
        "        cap = sub.spec.max_deliver\n        if delay > 0",
        "a delayed Retry forgets the attempt: redelivery restarts at attempt 1",
    ),
    # found by cosmic-ray's generated mutants (cosmic.py), each now killed by a case or test
    Mutant(
        "msg-reject-by-bytes-inverted",
        "messaging",
        _M + "_channel.py",
        "if spec.max_bytes is not None and nbytes + size > spec.max_bytes:",
        "if spec.max_bytes is not None and nbytes + size < spec.max_bytes:",
        "overflow reject by bytes refuses what fits and takes what does not (MSG-087)",
    ),
    Mutant(
        "msg-core-observation-range",
        "messaging",
        _M + "_core.py",
        "ch.last_seq + 1, ch.last_seq, 0",
        "ch.last_seq, ch.last_seq, 0",
        "core-only: the channel observation's empty range is off by one (MSG-091)",
    ),
    Mutant(
        "msg-unchanged-channel-updated",
        "messaging",
        _M + "_broker.py",
        "if current == effective:",
        "if current is effective:",
        "ensuring an unchanged channel records a channel_updated event",
    ),
    Mutant(
        "msg-max-age-drop-stamp",
        "messaging",
        _M + "_channel.py",
        'self.discard(m, "max_age", at=m.at + age)',
        'self.discard(m, "max_age", at=m.at)',
        "a max_age drop is stamped when the message was accepted, not when it aged out",
    ),
    Mutant(
        "msg-core-deliver-not-core",
        "messaging",
        _M + "_core.py",
        "                subscription=sub.id.name,\n                core=True,",
        "                subscription=sub.id.name,\n                core=False,",
        "core-only deliveries are recorded as stream deliveries",
    ),
    Mutant(
        "msg-archive-horizon-one-second",
        "messaging",
        _M + "_broker.py",
        "if self.archive_horizon_seconds <= 0:",
        "if self.archive_horizon_seconds < 1:",
        "an archive horizon under one second is refused",
    ),
    # -- payload -----------------------------------------------------------------------------
    Mutant(
        "pay-deadline-moves-back",
        "payload",
        _P + "_space.py",
        "if old is not None and old >= deadline:\n            return old",
        "if old is not None and old == deadline:\n            return old",
        "renew/acquire with an earlier deadline moves an obligation's deadline back",
    ),
    Mutant(
        "pay-release-not-idempotent",
        "payload",
        _P + "_space.py",
        'return "already-released", len(deadlines)',
        'return ("released" if deadlines else "reclaimed"), len(deadlines)',
        "a repeated release reports released/reclaimed again",
    ),
    Mutant(
        "pay-release-stale-generation",
        "payload",
        _P + "_space.py",
        'if obj.generation != ref.generation:\n            return "stale-generation", 0',
        "if obj.generation != ref.generation and ref.key not in self.sets:\n"
        '            return "stale-generation", 0',
        "a release naming an old generation touches the newer generation's obligations",
    ),
    Mutant(
        "pay-last-release-leaks",
        "payload",
        _P + "store.py",
        '        if outcome == "reclaimed":\n            space.reclaim(ref.key, "release")\n',
        "",
        "the last release does not reclaim the object",
    ),
    Mutant(
        "pay-timer-tie-order",
        "payload",
        _P + "_state.py",
        "OBLIGATION = 0\nOBJECT = 1",
        "OBLIGATION = 1\nOBJECT = 0",
        "an object's TTL due with its obligation's deadline is processed first",
    ),
    Mutant(
        "pay-timers-pop-wrong-head",
        "payload",
        _P + "_state.py",
        "if lane and (first is None or lane[0] < first):",
        "if lane and first is None:",
        "timers: a lane head is taken only when the heap is empty (out of due order)",
    ),
    Mutant(
        "pay-deadline-edge",
        "payload",
        _P + "_space.py",
        "while timers.next_at <= now:",
        "while timers.next_at < now:",
        "a timer due exactly now has not fired yet",
    ),
    Mutant(
        "pay-renew-old-timer-fires",
        "payload",
        _P + "_space.py",
        "if oset is None or oset.generation != gen or oset.deadlines.get(oid) != at:",
        "if oset is None or oset.generation != gen or oid not in oset.deadlines:",
        "an obligation's superseded (pre-renew) timer still expires it",
    ),
    Mutant(
        "pay-replace-counted-twice",
        "payload",
        _P + "_space.py",
        "over = self.used - freed + size - budget",
        "over = self.used + size - budget",
        "byte budget: the generation being replaced is not counted as freed",
    ),
    Mutant(
        "pay-put-replaces-obligated",
        "payload",
        _P + "store.py",
        "        oset = self._space.set_of(existing)\n        if oset is not None:",
        "        oset = self._space.set_of(existing)\n        if oset is not None and False:",
        "a put replaces a generation that still has obligations",
    ),
    Mutant(
        "pay-read-ignores-generation",
        "payload",
        _P + "store.py",
        "elif ref.generation and obj.generation != ref.generation:",
        "elif ref.generation and obj.generation != ref.generation and obj.size != ref.size:",
        "a read through a stale ref of the same size is served from the newer generation",
    ),
    # found by cosmic-ray's generated mutants (cosmic.py), each now killed by a case or test
    Mutant(
        "pay-digest-memo-by-order",
        "payload",
        _P + "store.py",
        "memo[0] is data",
        "memo[0] > data",
        "a put reuses the previous put's digest for a body that sorts before it (PAY-026)",
    ),
    Mutant(
        "pay-lru-stops-after-one",
        "payload",
        _P + "_tiers.py",
        "if over <= 0:",
        "if over >= 0:",
        "volatile-lru stops after one victim while still over the budget",
    ),
    Mutant(
        "pay-corrupt-grows-usage",
        "payload",
        _P + "_controls.py",
        "self._space.used += len(damaged) - len(data)",
        "self._space.used += len(damaged) + len(data)",
        "the corrupt control counts the object's bytes twice",
    ),
    Mutant(
        "pay-corrupt-from-last-byte",
        "payload",
        _P + "_controls.py",
        "bytes([data[0] ^ 0xFF])",
        "bytes([data[-1] ^ 0xFF])",
        "the corrupt control leaves a body whose last byte flipped equals its first intact",
    ),
    Mutant(
        "pay-truncate-zero-refused",
        "payload",
        _P + "_controls.py",
        "not 0 <= size < len(obj.data)",
        "not 1 <= size < len(obj.data)",
        "the truncate control refuses to cut a body to nothing",
    ),
    Mutant(
        "pay-bare-ttl-refused",
        "payload",
        _P + "_controls.py",
        'not 0 < ttl_seconds < float("inf")',
        'not 0 < ttl_seconds > float("inf")',
        "put_bare refuses every finite TTL",
    ),
    Mutant(
        "pay-generation-by-identity",
        "payload",
        _P + "_space.py",
        "        if obj.generation != ref.generation:\n            raise ConflictError(",
        "        if obj.generation is not ref.generation:\n            raise ConflictError(",
        "a ref's generation compared by identity: a decoded ref is a conflict (PAY-027)",
    ),
    Mutant(
        "pay-stale-release-remaining",
        "payload",
        _P + "_space.py",
        'return "stale-generation", 0',
        'return "stale-generation", 1',
        "a stale-generation release reports an obligation remaining (PAY-028)",
    ),
    # -- runtime store -----------------------------------------------------------------------
    Mutant(
        "rts-cas-ignores-version",
        "runtime_store",
        "memory/runtime_store.py",
        "        elif rec[1] != expected_version:\n            return False\n",
        "        elif expected_version is None:\n            return False\n",
        "CAS with a stale version wins",
    ),
    Mutant(
        "rts-cas-version-creates",
        "runtime_store",
        "memory/runtime_store.py",
        "        if rec is None:\n            if expected_version is not None:\n"
        "                return False\n",
        "        if rec is None:\n            pass\n",
        "CAS with a version on a missing key creates it",
    ),
    Mutant(
        "rts-delete-resets-counter",
        "runtime_store",
        "memory/runtime_store.py",
        "        del self._records[key]\n        return True",
        "        del self._records[key]\n        self._counters.pop(key, None)\n        return True",
        "delete resets the write counter: a version is reused after re-create",
    ),
    Mutant(
        "rts-cas-no-reread",
        "runtime_store",
        "memory/runtime_store.py",
        "                seen_version=None if rec is None else rec[1],\n            )\n"
        "            rec = self._records.get(key)\n        if rec is None:",
        "                seen_version=None if rec is None else rec[1],\n            )\n"
        "        if rec is None:",
        "CAS decides on the version read before the pause (missing re-read)",
    ),
    Mutant(
        "rts-delete-no-reread",
        "runtime_store",
        "memory/runtime_store.py",
        "                seen_version=None if rec is None else rec[1],\n            )\n"
        "            rec = self._records.get(key)\n        if rec is None or (",
        "                seen_version=None if rec is None else rec[1],\n            )\n"
        "        if rec is None or (",
        "delete decides on the version read before the pause (missing re-read)",
    ),
    Mutant(
        "rts-scan-excludes-prefix-key",
        "runtime_store",
        "memory/runtime_store.py",
        "if k.startswith(prefix))]",
        "if k.startswith(prefix) and k != prefix)]",
        "scan misses the key equal to the prefix itself",
    ),
    Mutant(
        "rts-scan-unsorted",
        "runtime_store",
        "memory/runtime_store.py",
        "for k in sorted(k for k in records if k.startswith(prefix))]",
        "for k in [k for k in records if k.startswith(prefix)]]",
        "scan returns keys in insertion order, not key order",
    ),
    Mutant(
        "rts-delete-none-needs-version",
        "runtime_store",
        "memory/runtime_store.py",
        "if rec is None or (expected_version is not None and rec[1] != expected_version):",
        "if rec is None or rec[1] != expected_version:",
        "delete with expected_version None fails instead of deleting unconditionally",
    ),
    Mutant(
        "rts-foreign-version-accepted",
        "runtime_store",
        "memory/runtime_store.py",
        "        rec = self._records.get(key)\n        if rec is None or rec[1] != expected_version:\n"
        "            self._check_version(key, expected_version)\n"
        "        if faults.barriers().armed(CAS_READ_AFTER):",
        "        rec = self._records.get(key)\n        if faults.barriers().armed(CAS_READ_AFTER):",
        "CAS takes a version of another key (or a made-up one) without ValidationError",
    ),
    # found by cosmic-ray's generated mutants (cosmic.py), each now killed by a case or test
    Mutant(
        "rts-file-delete-barrier-seen-inverted",
        "runtime_store",
        "memory/runtime_store.py",
        "                DELETE_READ_AFTER,\n                key=key,\n                expected_version=expected_version,\n                seen_version=None if seen is None else make_version(key_tag(key), seen),",
        "                DELETE_READ_AFTER,\n                key=key,\n                expected_version=expected_version,\n                seen_version=None if seen is not None else make_version(key_tag(key), seen),",
        "the file store's delete barrier is told the opposite of what the delete read",
    ),
    # -- allocation (memory allocation model and gpu planning) -------------------------------
    Mutant(
        "alc-stale-version-wins",
        "allocation",
        "memory/_allocation_ownership.py",
        "    if read != nplan.resource_version:\n        raise OwnershipConflict(",
        "    if read < nplan.resource_version:\n        raise OwnershipConflict(",
        "a plan from an older snapshot reserves a node whose version moved",
    ),
    Mutant(
        "alc-failed-reserve-keeps-nodes",
        "allocation",
        "memory/_allocation_ownership.py",
        "        for name in taken:\n            drop(c, name, claim_id, operation_id)\n",
        "",
        "a reserve refused on its second node keeps the first",
    ),
    Mutant(
        "alc-whole-exact-fit-refused",
        "allocation",
        "memory/_allocation_ownership.py",
        "node.gpu_count - node.used_devices < whole",
        "node.gpu_count - node.used_devices <= whole",
        "reserve refuses a plan that uses exactly the free whole devices",
    ),
    Mutant(
        "alc-retry-other-plan",
        "allocation",
        "memory/allocation.py",
        "        if plan != claim.plan:\n",
        "        if plan.plan_id != claim.plan.plan_id and False:\n",
        "a retry under a used operation id with another plan returns the old claim",
    ),
    Mutant(
        "alc-retry-stale-generation",
        "allocation",
        "memory/allocation.py",
        "        if expected not in (None, claim.gen):\n",
        "        if expected is not None and not expected.startswith(claim.claim_id):\n",
        "a retry naming a stale claim generation is accepted",
    ),
    Mutant(
        "alc-generation-prefix-only",
        "allocation",
        "memory/allocation.py",
        "        if expected != claim.gen:\n",
        "        if expected.split('@')[0] != claim.claim_id:\n",
        "release/reconcile accept a stale generation of the claim",
    ),
    Mutant(
        "alc-pending-job-not-superseding",
        "allocation",
        "memory/_allocation_claim.py",
        "        or (job is not None and job.generation > gen)\n",
        "",
        "a later geometry write still pending does not supersede the claim's",
    ),
    Mutant(
        "alc-pack-lost-reset",
        "allocation",
        "gpu/packing.py",
        "            remaining[host] = left\n            del assignment[workload]\n",
        "            del assignment[workload]\n",
        "packing: backtracking does not give the devices back",
    ),
    Mutant(
        "alc-pack-exact-fit",
        "allocation",
        "gpu/packing.py",
        "            if left < count:\n",
        "            if left <= count:\n",
        "packing: a host with exactly the devices a request needs is skipped",
    ),
    Mutant(
        "alc-pack-ignores-eligibility-kinds",
        "allocation",
        "gpu/packing.py",
        "key = (left, kinds[host][i:])",
        "key = (left, ())",
        "packing: hosts with equal free devices are interchangeable whatever their eligibility",
    ),
    Mutant(
        "alc-no-exhaustive-fallback",
        "allocation",
        "gpu/placement.py",
        "    if exhaustive is not None and exhaustive is not False:\n        return exhaustive\n",
        "",
        "the planner gives up when greedy best fit fragments (no backtracking)",
    ),
    Mutant(
        "alc-device-names-from-zero",
        "allocation",
        "memory/_allocation_claim.py",
        "start = next_free.get(p.node, nodes[p.node].used_devices)",
        "start = next_free.get(p.node, 0)",
        "bindings name the whole GPUs from gpu0, over the ones in use",
    ),
    Mutant(
        "alc-geometry-on-busy-node",
        "allocation",
        "gpu/placement.py",
        "self.idle and can_change and view.family is not None and view.gpu_count > 0",
        "can_change and view.family is not None and view.gpu_count > 0",
        "a geometry change is planned on a node with running workloads",
    ),
    Mutant(
        "alc-mig-placeable-last-start",
        "allocation",
        "gpu/geometry.py",
        "for i in range(first, len(ms) - left + 1):",
        "for i in range(first, len(ms) - left):",
        "MIG geometry: the last legal start position is never tried",
    ),
    # found by cosmic-ray's generated mutants (cosmic.py), each now killed by a case or test
    Mutant(
        "alc-scope-label-ordering",
        "allocation",
        "memory/_allocation_reads.py",
        "and all(node.labels.get(k) == v for k, v in labels.items())",
        "and all((node.labels.get(k) or '') >= v for k, v in labels.items())",
        "an inventory label scope matches values that sort after the wanted one (ALC-028)",
    ),
    Mutant(
        "alc-restore-forgets-original",
        "allocation",
        "memory/_allocation_cluster.py",
        "            if n.restore_record is None:",
        "            if n.restore_record is not None:",
        "release restores a default MIG config, not the node's own (ALC-029)",
    ),
    Mutant(
        "alc-memory-refusal-total",
        "allocation",
        "gpu/layout.py",
        'f"have {card.memory * gpu_count}"',
        'f"have {card.memory}"',
        "a node-wide memory refusal states one card's slices as the node's",
    ),
    # -- vtime -------------------------------------------------------------------------------
    Mutant(
        "vt-autojump-backwards",
        "vtime",
        "vtime/_loop.py",
        "                if when > clock._now:\n                    clock._now = when\n",
        "                clock._now = when\n",
        "a timer with a negative delay moves the clock backwards",
    ),
    Mutant(
        "vt-set-now-backwards",
        "vtime",
        "vtime/_clock.py",
        "if when > self._now and when != math.inf:",
        "if when != math.inf:",
        "_set_now lets the clock go backwards",
    ),
    Mutant(
        "vt-spin-off-by-one",
        "vtime",
        "vtime/_loop.py",
        "if spins >= clock._spin_limit:",
        "if spins > clock._spin_limit:",
        "spin counter: time moves one busy round late",
    ),
    Mutant(
        "vt-spin-lost-reset",
        "vtime",
        "vtime/_loop.py",
        "                        spins = 0\n                        now = spin_at = self._vt_spin_jump(now)",
        "                        now = spin_at = self._vt_spin_jump(now)",
        "spin counter: not reset after a spin jump",
    ),
    Mutant(
        "vt-call-at-lifo-ties",
        "vtime",
        "vtime/_loop.py",
        "        timer = _Timer(when, callback, args, self, context)\n        self._vt_seq += 1\n"
        "        heapq.heappush(self._vt_heap, (when, self._vt_seq, timer))\n        return timer\n\n"
        "    def call_at(",
        "        timer = _Timer(when, callback, args, self, context)\n        self._vt_seq -= 1\n"
        "        heapq.heappush(self._vt_heap, (when, self._vt_seq, timer))\n        return timer\n\n"
        "    def call_at(",
        "timers with equal deadlines (call_at, clock.at) fire last-set first",
    ),
    Mutant(
        "vt-due-now-deferred",
        "vtime",
        "vtime/_loop.py",
        "                while heap and heap[0][0] <= now:",
        "                while heap and heap[0][0] < now:",
        "a timer due exactly now waits while other callbacks keep the loop busy",
    ),
    Mutant(
        "vt-manual-horizon-edge",
        "vtime",
        "vtime/_clock.py",
        "return self.autojump or when <= self._horizon or when <= self._now",
        "return self.autojump or when < self._horizon or when <= self._now",
        "manual mode: a timer exactly at what advance() reached is not taken",
    ),
    Mutant(
        "vt-standalone-advance-edge",
        "vtime",
        "vtime/_clock.py",
        "        while pending and pending[0][0] <= upto:\n            # the timers",
        "        while pending and pending[0][0] < upto:\n            # the timers",
        "standalone advance(s) does not fire a timer due exactly at the target",
    ),
    Mutant(
        "vt-advance-negative",
        "vtime",
        "vtime/_clock.py",
        'if not math.isfinite(seconds) or seconds < 0:\n            raise ValueError(f"cannot advance',
        'if not math.isfinite(seconds):\n            raise ValueError(f"cannot advance',
        "advance() accepts a negative duration",
    ),
    Mutant(
        "vt-at-negative-delay",
        "vtime",
        "vtime/_clock.py",
        "when = self._now + max(delay, 0.0)",
        "when = self._now + delay",
        "clock.at with a negative delay is set in the past",
    ),
    Mutant(
        "vt-jitter-past-horizon",
        "vtime",
        "vtime/_clock.py",
        "limit = math.inf if self.autojump else max(self._horizon, when)",
        "limit = math.inf",
        "seeded jitter overshoots past what advance() reached in manual mode",
    ),
    # the gaps of cosmic-ray's vtime sample (benchmarks/mutation/cosmic.py --area vtime)
    Mutant(
        "vt-call-later-nan-by-identity",
        "vtime",
        "vtime/_loop.py",
        'if when != when:  # NaN\n            raise ValueError("timer delay must not be NaN")',
        'if when is not when:  # NaN\n            raise ValueError("timer delay must not be NaN")',
        "call_later tests NaN by identity: a NaN delay is scheduled instead of refused",
    ),
    Mutant(
        "vt-bare-loop-no-main-task",
        "vtime",
        "vtime/_loop.py",
        "self._vt_main = future if isinstance(future, asyncio.Task) else None",
        "self._vt_main = None",
        "a loop run without a guard forgets its main task: a deadlock is raised from "
        "run_until_complete instead of at the blocked await",
    ),
    Mutant(
        "vt-interrupt-refires-its-timer",
        "vtime",
        "vtime/_clock.py",
        "for entry in group[i + 1 :]:",
        "for entry in group[i:]:",
        "a KeyboardInterrupt from a standalone timer leaves that timer pending: it fires again",
    ),
    Mutant(
        "vt-real-wait-kept-across-instants",
        "vtime",
        "vtime/_clock.py",
        "if self._at != now or self._deadline != deadline:",
        "if self._deadline != deadline:",
        "real I/O pending: the real-time count is not restarted when time moves under the "
        "same deadline",
    ),
    Mutant(
        "vt-fired-timer-still-scheduled",
        "vtime",
        "vtime/_loop.py",
        "                    timer._scheduled = False\n                    ready.append(timer)",
        "                    ready.append(timer)",
        "a timer fired by an idle jump still counts as scheduled: its late cancel inflates "
        "the cancelled count that triggers heap compaction",
    ),
    Mutant(
        "vt-call-at-nan-by-identity",
        "vtime",
        "vtime/_loop.py",
        'if when != when:  # NaN\n            raise ValueError("timer deadline must not be NaN")',
        'if when is not when:  # NaN\n            raise ValueError("timer deadline must not be NaN")',
        "call_at tests NaN by identity: a NaN deadline is scheduled instead of refused",
    ),
    Mutant(
        "vt-compaction-count-off-by-one",
        "vtime",
        "vtime/_loop.py",
        "heapq.heapify(heap)  # _run_once holds a reference to this very list\n"
        "            self._vt_cancelled = 0",
        "heapq.heapify(heap)  # _run_once holds a reference to this very list\n"
        "            self._vt_cancelled = 1",
        "heap compaction leaves the cancelled count at one instead of none",
    ),
    Mutant(
        "vt-deadlock-note-inverted",
        "vtime",
        "vtime/_clock.py",
        "if self._lost_advance is not None:\n            msg +=",
        "if self._lost_advance is None:\n            msg +=",
        "a deadlock report names a dropped advance() only when there was none (Note: None)",
    ),
    Mutant(
        "vt-clock-start-finite-and",
        "vtime",
        "vtime/_clock.py",
        "if not math.isfinite(start) or not math.isfinite(wall_start):",
        "if not math.isfinite(start) and not math.isfinite(wall_start):",
        "a clock starting at inf or NaN is accepted unless both readings are",
    ),
    Mutant(
        "vt-deadlock-cap-never-reset",
        "vtime",
        "vtime/_clock.py",
        "            self._deadlock_at = self._now\n            self._deliveries = 0\n",
        "            self._deadlock_at = self._now\n",
        "the cap on deadlock reports counts over the whole run, not per instant: after 1000 "
        "handled deadlocks the next one is no longer delivered",
    ),
    Mutant(
        "vt-executor-shutdown-keeps-count",
        "vtime",
        "vtime/_loop.py",
        "        finally:\n            self._vt_threads -= 1\n",
        "        finally:\n            pass\n",
        "shutting the default executor down leaves a thread counted: time never moves again",
    ),
    Mutant(
        "vt-inline-sleep-result-lost",
        "vtime",
        "vtime/_loop.py",
        "fut.set_result(args[1])",
        "fut.set_result(None)",
        "asyncio.sleep(d, result) woken on the inlined path returns None",
    ),
)
