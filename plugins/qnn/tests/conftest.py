"""Fixtures of the QNN backend's tests: the backend and its real EP (registered once per process)."""

from __future__ import annotations

import pytest
from mobile_ep_qnn.backend import QnnBackend


@pytest.fixture(scope="session")
def qnn_backend() -> QnnBackend:
    return QnnBackend()


@pytest.fixture(scope="session")
def qnn_ep(qnn_backend):
    return qnn_backend.execution_provider()
