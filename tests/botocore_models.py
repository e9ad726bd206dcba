"""One botocore data loader for the whole test process.

botocore gives every new Session a Loader of its own, which reads and parses the JSON service
models and endpoints.json again (about 0.1 s per client). Production makes one Session per cold
start; the tests make several per test (`configure()` per test, moto resets boto3's default
session), so about a third of a handler test's time went to parsing the same files. The models
are read-only data, and botocore's own loader caches them per instance, so sharing the instance
changes no behaviour (aws-cli's test suite shares one the same way).
"""

from __future__ import annotations

import functools
import os

import boto3
import botocore.loaders
import botocore.session

# boto3 adds its resource models' folder to the loader of every Session it makes.
BOTO3_DATA = os.path.join(os.path.dirname(boto3.__file__), "data")


class _SearchPaths(list[str]):
    """A search path list that keeps one copy of each folder (boto3 appends per Session)."""

    def append(self, path: str) -> None:
        if path not in self:
            super().append(path)


@functools.cache
def shared_loader(search_path_string: str | None = None) -> botocore.loaders.Loader:
    """The process's loader for one AWS_DATA_PATH (as botocore.loaders.create_loader makes it):
    the same instance every time, so its caches are shared. boto3's folder is on it from the
    start, so no lookup is cached before boto3 adds it."""
    extra = [
        os.path.expanduser(os.path.expandvars(path))
        for path in (search_path_string.split(os.pathsep) if search_path_string else [])
    ]
    # The loader keeps this list as its search_paths, and adds botocore's own folders to it.
    loader = botocore.loaders.Loader(extra_search_paths=_SearchPaths(extra))
    loader.search_paths.append(BOTO3_DATA)
    return loader


def share_one_loader() -> None:
    """Every botocore Session made from now on in this process uses `shared_loader`."""
    botocore.session.create_loader = shared_loader
