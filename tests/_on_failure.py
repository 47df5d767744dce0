"""What a failed test shows, and what it leaves behind (a plugin of this suite: conftest.py).

- **Server logs.** A failed test that used a started server or cluster (a fixture value:
  ``ServerProcess``, ``ClusterProcess``) shows their last log lines in its report, as a
  section ``server log: <fixture>`` — a flake under load comes with the servers' side of it.
  Conformance runs on real providers show theirs through the conformance plugin.
- **Leaks.** A failed test's frames live on after it: pytest keeps its exception as
  ``sys.last_value`` (for post-mortem debugging) until the next test's call begins, and the
  frames may sit in reference cycles until the collector runs. An unclosed socket among them
  then warned inside another test and, under ``filterwarnings = error``, failed that test too
  (the hog run at ``9e7aaf8``: a timed-out ``redis_calls`` failed
  ``test_async_context_manager[trio]`` on the same worker). Here, as a failed test's teardown
  begins, those references are dropped and the collector runs, so the leak is reported on
  the test that leaked it (an error in its teardown); what its fixtures hold they close as
  usual. One case still lands on the next test: a fixture finalizer of the failed test that
  raises stops pytest's teardown hooks before it collects the warning.
"""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Generator

import pytest

from videoflow_aio.testing.clusters import ClusterProcess
from videoflow_aio.testing.servers import ServerProcess

LOG_LINES = 20

_failed = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        item.stash[_failed] = True
        if call.when in ("setup", "call"):  # the fixtures set up so far
            for name, value in getattr(item, "funcargs", {}).items():
                if isinstance(value, ServerProcess | ClusterProcess):
                    report.sections.append((f"server log: {name}", value.log_tail(LOG_LINES)))
    return report


@pytest.hookimpl(tryfirst=True)  # before pytest's collection of unraisable errors (trylast)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    if not item.stash.get(_failed, False):
        return
    for name in ("last_type", "last_value", "last_traceback", "last_exc"):
        with contextlib.suppress(AttributeError):
            delattr(sys, name)
    gc.collect()
