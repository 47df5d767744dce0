"""The RTS cases catch real bugs: each mutant of the reference model fails the cases that
describe the behaviour it breaks (and the faithful models pass them all; see
tests/conformance/test_conformance.py for the full matrix)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio.lowlevel
import pytest

from videoflow_aio import faults
from videoflow_aio.conformance import Case, Harness, Provider, get_provider, run_case, select_cases
from videoflow_aio.contracts.runtime_store import CAS_READ_AFTER, DELETE_READ_AFTER
from videoflow_aio.memory.runtime_store import FileRuntimeStore, MemoryRuntimeStore
from videoflow_aio.vtime import current_clock

RTS_CASES = {c.id: c for c in select_cases("runtime_store")}


class MutantProvider(Provider):
    def __init__(self, cls: type[Any]) -> None:
        self.cls = cls
        self.name = cls.__name__

    def contracts(self) -> frozenset[str]:
        return frozenset({"runtime_store"})

    @asynccontextmanager
    async def harness(self, case: Case) -> AsyncIterator[Harness]:
        async def factory(**options: Any) -> Any:
            return self.cls(**options)

        yield Harness(
            provider=self.name,
            contract=case.contract,
            factory=factory,
            clock=current_clock(),
            allowed_controls=case.controls,
        )


class ReusesVersions(MemoryRuntimeStore):
    async def delete(self, key: str, expected_version: str | None) -> bool:
        done = await super().delete(key, expected_version)
        if done:
            self._counters.pop(key, None)  # forgets the counter: the next create reuses "1-…"
        return done


class OverwritesOnCreate(MemoryRuntimeStore):
    async def cas(self, key: str, expected_version: str | None, value: bytes) -> bool:
        if expected_version is None and key in self._records:
            _, version = self._records[key]
            return await super().cas(key, version, value)
        return await super().cas(key, expected_version, value)


class LastWriterWins(MemoryRuntimeStore):
    async def cas(self, key: str, expected_version: str | None, value: bytes) -> bool:
        current = self._records.get(key)
        return await super().cas(key, None if current is None else current[1], value)


class DeleteIgnoresVersion(MemoryRuntimeStore):
    async def delete(self, key: str, expected_version: str | None) -> bool:
        return await super().delete(key, None)


class UnsortedScan(MemoryRuntimeStore):
    async def scan(self, prefix: str) -> list[tuple[str, bytes, str]]:
        return [(k, *v) for k, v in self._records.items() if k.startswith(prefix)]


class ForgetsLogOrder(MemoryRuntimeStore):
    async def log_entries(self, log: str) -> list[bytes]:
        return sorted(await super().log_entries(log))


class NumbersRestart(MemoryRuntimeStore):
    async def append(self, log: str, record: bytes) -> int:
        await super().append(log, record)
        return 1


class AcceptsAnything(MemoryRuntimeStore):
    async def cas(self, key: str, expected_version: str | None, value: bytes) -> bool:
        if not isinstance(value, bytes):
            value = str(value).encode()
        return await super().cas(key or "empty", expected_version, value)


class ReadThenWrite(MemoryRuntimeStore):
    """Compares, yields, then writes: two tasks can both win one version."""

    async def cas(self, key: str, expected_version: str | None, value: bytes) -> bool:
        current = self._records.get(key)
        if (None if current is None else current[1]) != expected_version:
            return False
        await anyio.lowlevel.checkpoint()
        self._records.pop(key, None)
        return await super().cas(key, None, value)


class ConflatesKeys(MemoryRuntimeStore):
    """Maps keys the way a naive file store would ('/' -> '%2f'), so distinct keys collide."""

    async def cas(self, key: str, expected_version: str | None, value: bytes) -> bool:
        return await super().cas(key.replace("/", "%2f"), expected_version, value)

    async def get(self, key: str) -> tuple[bytes | None, str | None]:
        return await super().get(key.replace("/", "%2f"))


class ComparesBeforeTheBarrier(MemoryRuntimeStore):
    """Decides on what it read before the barrier: the classic lost update."""

    async def cas(self, key: str, expected_version: str | None, value: bytes) -> bool:
        current = self._records.get(key)
        await faults.reach(
            CAS_READ_AFTER,
            key=key,
            expected_version=expected_version,
            seen_version=None if current is None else current[1],
        )
        if (None if current is None else current[1]) != expected_version:
            return False
        self._records.pop(key, None)
        return await super().cas(key, None, value)

    async def delete(self, key: str, expected_version: str | None) -> bool:
        current = self._records.get(key)
        await faults.reach(
            DELETE_READ_AFTER,
            key=key,
            expected_version=expected_version,
            seen_version=None if current is None else current[1],
        )
        if current is None or current[1] != expected_version:
            return False
        self._records.pop(key, None)
        return True


MUTANTS: list[tuple[type[Any], set[str]]] = [
    (ComparesBeforeTheBarrier, {"RTS-013", "RTS-014"}),
    (ReusesVersions, {"RTS-004"}),
    (OverwritesOnCreate, {"RTS-001"}),
    (LastWriterWins, {"RTS-002", "RTS-007"}),
    (DeleteIgnoresVersion, {"RTS-003"}),
    (UnsortedScan, {"RTS-005"}),
    (ForgetsLogOrder, {"RTS-006"}),
    (NumbersRestart, {"RTS-006"}),
    (ReadThenWrite, {"RTS-007"}),
    (ConflatesKeys, {"RTS-011"}),
]


@pytest.mark.parametrize(("cls", "caught_by"), MUTANTS, ids=[m.__name__ for m, _ in MUTANTS])
def test_each_mutant_fails_the_cases_that_describe_its_bug(
    cls: type[Any], caught_by: set[str]
) -> None:
    provider = MutantProvider(cls)
    for case_id in sorted(caught_by):
        result = run_case(RTS_CASES[case_id], provider, "asyncio")
        assert result.outcome == "fail", (case_id, result)


def test_a_provider_cannot_opt_out_of_the_boundary() -> None:
    """A subclass that would accept anything is checked at the contract boundary like every
    provider, so the bad-input case passes even for it."""
    result = run_case(RTS_CASES["RTS-009"], MutantProvider(AcceptsAnything), "asyncio")
    assert result.outcome == "pass", result


def test_the_rts_cases_are_numbered_without_gaps() -> None:
    # the 8xx family: faults on cluster members (conformance/cases/members.py)
    numbered = sorted(c for c in RTS_CASES if not c.startswith("RTS-8"))
    assert numbered == [f"RTS-{i:03d}" for i in range(1, 15)]


class NotDurableAfterAll(FileRuntimeStore):
    """Claims durability but a reopened store starts empty."""

    def __init__(self, root: str, **_: Any) -> None:
        super().__init__(root)


def test_restart_case_catches_a_store_that_forgets(tmp_path: Path) -> None:
    roots = iter(range(100))

    class FreshRootProvider(MutantProvider):
        @asynccontextmanager
        async def harness(self, case: Case) -> AsyncIterator[Harness]:
            async def factory(**options: Any) -> Any:
                return NotDurableAfterAll(str(tmp_path / f"r{next(roots)}"))  # ignores reopen_of

            yield Harness(provider="forgetful", contract=case.contract, factory=factory)

    provider = FreshRootProvider(NotDurableAfterAll)
    provider.real_time = True
    assert run_case(RTS_CASES["RTS-008"], provider, "asyncio").outcome == "fail"
    good = get_provider("file")
    for backend in ("asyncio", "trio"):
        assert run_case(RTS_CASES["RTS-008"], good, backend).outcome == "pass"
