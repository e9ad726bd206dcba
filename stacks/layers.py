"""The Lambda layers every Sundial function loads: the domain package and its dependencies."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from stacks.paths import ASSET_EXCLUDES, DEPS_LAYER_DIR, DOMAIN_LAYER_DIR
from stacks.settings import LAMBDA_ARCH, LAMBDA_RUNTIME


class MissingDepsLayerError(FileNotFoundError):
    """The dependencies layer has not been built."""


class SundialLayers(Construct):
    """`domain`: the `sundial` package (layers/sundial/python/sundial).

    `deps`: its pinned runtime dependencies (powertools, pydantic, python-ulid), built by
    `make deps` as manylinux wheels for exactly LAMBDA_RUNTIME / LAMBDA_ARCH.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        domain_layer_dir: Path = DOMAIN_LAYER_DIR,
        deps_layer_dir: Path = DEPS_LAYER_DIR,
    ) -> None:
        super().__init__(scope, construct_id)
        if not (deps_layer_dir / "python").is_dir():
            raise MissingDepsLayerError(
                f"the Lambda dependencies layer {deps_layer_dir} is missing: run `make deps` first"
            )
        # The local runtime (sundial.local) runs only on a developer's machine, never in Lambda.
        self.domain = self._layer(
            "Domain", domain_layer_dir, "Sundial domain package", ["python/sundial/local"]
        )
        self.deps = self._layer("Deps", deps_layer_dir, "Sundial runtime dependencies")

    @property
    def all(self) -> list[lambda_.ILayerVersion]:
        return [self.deps, self.domain]

    def _layer(
        self, construct_id: str, path: Path, description: str, exclude: list[str] | None = None
    ) -> lambda_.LayerVersion:
        return lambda_.LayerVersion(
            self,
            construct_id,
            code=lambda_.Code.from_asset(str(path), exclude=[*ASSET_EXCLUDES, *(exclude or [])]),
            compatible_runtimes=[LAMBDA_RUNTIME],
            compatible_architectures=[LAMBDA_ARCH],
            description=description,
        )
