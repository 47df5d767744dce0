"""``reconcile``: one pass of a store's objects against the runtime's obligation ledger."""

from __future__ import annotations

from collections.abc import Mapping

from ...contracts.payload import INTENT_PREFIX, ReclamationObservation
from ...observe import ObservationLog
from ._space import Objects
from ._state import ObligationSet, StoredObject


class Reconciliation:
    """One reconcile pass. For each object, by its obligation set and the ledger:

    * **with a set**, listed in the ledger: the obligations the ledger no longer lists are
      cancelled; not listed: its publisher intents (``intent/…``) are cancelled — at once
      (the seed's rule), or once the object is older than ``intent_grace`` when that is set
      (a put may still be attaching them). A set emptied by cancelling reclaims the object.
    * **without a set** (a put that died before attaching it, or a set that expired): kept
      when the ledger lists readers for it; reclaimed as an orphan once older than
      ``grace``; else left in grace. A missing set never means "everyone finished".
    * Sets left dangling (of an object gone or replaced) are removed.
    """

    def __init__(
        self,
        space: Objects,
        required: Mapping[str, tuple[str, ...]],
        grace: float,
        intent_grace: float,
        operation_id: str,
        now: float,
    ) -> None:
        self.space = space
        self.required = required
        self.operation_id = operation_id
        self.now = now
        self.grace = grace
        self.intent_grace = intent_grace
        self.cancelled: list[tuple[str, str]] = []
        self.reclaimed: list[str] = []
        self.orphans: list[str] = []
        self.in_grace: list[str] = []
        self.kept_required: list[str] = []

    def run(self) -> ReclamationObservation:
        space = self.space
        objects = list(space.objects.items())
        self._examine(objects)
        observation = ReclamationObservation(
            self.operation_id,
            len(objects),
            tuple(self.cancelled),
            tuple(self.reclaimed),
            tuple(self.orphans),
            tuple(self.in_grace),
            tuple(self.kept_required),
            tuple(self._drop_dangling_sets()),
        )
        if space.log is not None:
            self._record(space.log, observation)
        return observation

    def _examine(self, objects: list[tuple[str, StoredObject]]) -> None:
        sets, required = self.space.sets, self.required
        now, grace, intent_grace = self.now, self.grace, self.intent_grace
        cancel, without_set = self._cancel, self._without_set
        for key, obj in objects:
            age = now - obj.created_at
            oset = sets.get(key)
            listed = required.get(key)
            if oset is None or oset.generation != obj.generation:
                without_set(key, listed, age > grace)
            elif listed is not None:  # what the ledger no longer lists
                cancel(key, oset, [oid for oid in oset.deadlines if oid not in listed])
            elif not intent_grace or age > intent_grace:  # unlisted: its publisher intents
                cancel(key, oset, [oid for oid in oset.deadlines if oid.startswith(INTENT_PREFIX)])
            # else younger than the intent grace: a put may still be in progress

    def _without_set(self, key: str, listed: tuple[str, ...] | None, old: bool) -> None:
        if listed:
            self.kept_required.append(key)  # the ledger says readers still need it
        elif old:
            self.space.reclaim(key, "orphan", self.operation_id)
            self.orphans.append(key)
        else:
            self.in_grace.append(key)

    def _drop_dangling_sets(self) -> list[str]:
        sets, objects = self.space.sets, self.space.objects
        dangling = [
            k for k, s in sets.items() if k not in objects or objects[k].generation != s.generation
        ]
        for key in dangling:
            del sets[key]
        return dangling

    def _cancel(self, key: str, oset: ObligationSet, drop: list[str]) -> None:
        """Cancel ``drop`` on ``key``'s set; an emptied set reclaims the object."""
        if not drop:
            return
        deadlines = oset.deadlines
        cancelled = self.cancelled
        for oid in drop:
            del deadlines[oid]
            cancelled.append((key, oid))
        if not deadlines:
            self.space.reclaim(key, "reconcile", self.operation_id)
            self.reclaimed.append(key)

    def _record(self, log: ObservationLog, obs: ReclamationObservation) -> None:
        for key, oid in obs.cancelled:
            log.record("cancel", subject=key, ident=oid, operation_id=self.operation_id)
        log.record(
            "reconcile",
            subject=self.space.store_id,
            ident=self.operation_id,
            examined=obs.examined,
            cancelled=len(obs.cancelled),
            reclaimed=len(obs.reclaimed),
            orphans_reclaimed=len(obs.orphans_reclaimed),
            orphans_in_grace=len(obs.orphans_in_grace),
            dangling_sets_removed=len(obs.dangling_sets_removed),
        )
