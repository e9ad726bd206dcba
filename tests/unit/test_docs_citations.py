"""Every `Class.method` the documents cite exists.

The rules live with the code (docs/invariants.md): the documents, the docstrings and the
comments name the classes and methods that enforce them (`JobStore.put_new`, `ShardSweep.finish`). A
citation is a CamelCase class name, a dot and an attribute, backticked or plain; each must be an
attribute (a method, a property, a field) of a class of that name somewhere in the sundial
package (or the CDK app's `stacks`, which the deployment pages cite), found by importing every
module and walking its classes. A rename that leaves a
document behind fails here, naming the document and the citation.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import io
import pkgutil
import re
import tokenize
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

import stacks
import sundial

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(sundial.__file__).parent
DOCUMENTS = [ROOT / "README.md", ROOT / "RELIABILITY.md", *sorted((ROOT / "docs").glob("*.md"))]

# A CamelCase name, a dot, an attribute; not part of a dotted path (`a.Foo.bar`) or a file name
# (`Sundial.template.json`).
CITATION = re.compile(
    r"(?<![\w.])([A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)*)\.(_{0,2}[A-Za-z]\w*)(?!\w)(?!\.\w)"
)
# Names that look like a citation and are not one of ours.
NOT_OURS = {"Node"}  # Node.js


def citations(text: str) -> Iterator[tuple[str, str]]:
    for match in CITATION.finditer(text):
        if match.group(1) not in NOT_OURS:
            yield match.group(1), match.group(2)


def sources() -> Iterator[tuple[str, str]]:
    """(where, text): each document, and each docstring (a module's, a class's, a function's)
    and comment of the package."""
    for path in DOCUMENTS:
        yield str(path.relative_to(ROOT)), path.read_text()
    for path in sorted(PACKAGE.rglob("*.py")):
        where, source = str(path.relative_to(ROOT)), path.read_text()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                docstring = ast.get_docstring(node)
                if docstring:
                    yield where, docstring
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                yield where, token.string


@cache
def classes() -> dict[str, list[type]]:
    """Every class defined in the sundial package and the CDK app's stacks, by name."""
    found: dict[str, list[type]] = {}
    for package in (sundial, stacks):
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            module = importlib.import_module(info.name)
            for name, value in vars(module).items():
                if inspect.isclass(value) and value.__module__ == module.__name__:
                    found.setdefault(name, []).append(value)
    return found


def has_attribute(cls: type, name: str) -> bool:
    """A method, property or class attribute, or a field (a dataclass's, or an annotation)."""
    if hasattr(cls, name):
        return True
    return any(name in getattr(base, "__annotations__", {}) for base in cls.__mro__)


def unresolved(text: str) -> list[str]:
    known = classes()
    return [
        f"{cls_name}.{attribute}"
        for cls_name, attribute in citations(text)
        if not any(has_attribute(cls, attribute) for cls in known.get(cls_name, []))
    ]


def test_every_cited_class_and_method_exists() -> None:
    # Given the documents and the modules' docstrings, When their citations are resolved
    stale = [f"{where}: {cite}" for where, text in sources() for cite in unresolved(text)]
    # Then each names a real attribute of a real class of the package
    assert stale == [], "citations of nothing:\n" + "\n".join(stale)


def test_the_documents_do_cite_something() -> None:
    # A pattern that matched nothing would pass the test above vacuously.
    cited = {c for _, text in sources() for c in citations(text)}
    assert ("JobStore", "put_new") in cited
    assert len(cited) > 20


@pytest.mark.parametrize(
    ("text", "stale"),
    [
        ("`JobStore.put_new` refuses it", []),
        ("ShardSweep.finish holds the cursor", []),
        ("a field: Released.busy, a base's method: JobStore.get", []),
        ("`JobStore.put_nothing` refuses it", ["JobStore.put_nothing"]),
        ("see NoSuchStore.put, and Node.js", ["NoSuchStore.put"]),
        ("a file: `cdk.out/Sundial.template.json`, a path: sundial.timing.DIRECT", []),
    ],
)
def test_a_made_up_citation_fails(text: str, stale: list[str]) -> None:
    assert unresolved(text) == stale
