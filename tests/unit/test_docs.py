"""Every relative link in the documentation leads somewhere.

A link to a file must name one that exists (relative to the document, as GitHub resolves it), and
a link with an `#anchor` into a markdown file must name a heading of that file, by GitHub's rules:
the heading's text lowercased, punctuation dropped, spaces turned into `-`, and `-1`, `-2`, ...
added to repeats. The documents are parsed with markdown-it-py, so a `[x](y)` inside a code block
or inline code is not taken for a link, nor a `# comment` in a shell example for a heading.
"""

import re
from collections import Counter
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from urllib.parse import unquote

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = sorted(
    [
        ROOT / "README.md",
        ROOT / "RELIABILITY.md",
        ROOT / "BENCHMARKS.md",
        ROOT / "glue" / "README.md",
        *(ROOT / "docs").glob("*.md"),
    ]
)
_PARSER = MarkdownIt("commonmark").enable("table")
_EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # https:, mailto:, ...


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading with this text (before numbering repeats)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _inline_text(token: Token) -> str:
    return "".join(
        child.content for child in token.children or [] if child.type in ("text", "code_inline")
    )


def anchors(path: Path) -> set[str]:
    """Every anchor the document's headings give it."""
    tokens = _PARSER.parse(path.read_text(encoding="utf-8"))
    seen: Counter[str] = Counter()
    found = set()
    for opening, inline in pairwise(tokens):
        if opening.type != "heading_open":
            continue
        anchor = github_anchor(_inline_text(inline))
        found.add(anchor if seen[anchor] == 0 else f"{anchor}-{seen[anchor]}")
        seen[anchor] += 1
    return found


def links(path: Path) -> Iterator[str]:
    """The targets of the document's links and images, in order; text that only looks like a
    link (`[x](y` with its parenthesis never closed) as `MALFORMED` and the text."""
    for token in _PARSER.parse(path.read_text(encoding="utf-8")):
        for child in token.children or []:
            if child.type == "link_open":
                yield str(child.attrs["href"])
            elif child.type == "image":
                yield str(child.attrs["src"])
            elif child.type == "text" and "](" in child.content:
                yield MALFORMED + child.content


MALFORMED = "malformed link: "


def broken_links(path: Path) -> list[str]:
    """The document's relative links that lead nowhere, each with the reason."""
    broken = []
    for target in links(path):
        if target.startswith(MALFORMED) or _EXTERNAL.match(target):
            broken += [target] if target.startswith(MALFORMED) else []
            continue
        file_part, _, anchor = target.partition("#")
        destination = (path.parent / unquote(file_part)).resolve() if file_part else path
        if not destination.exists():
            broken.append(f"{target}: no such file")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(f"{target}: no heading #{anchor} in {destination.name}")
    return broken


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file_and_heading_that_exist(document: Path) -> None:
    # Given a document of the repository; When its links are followed; Then none is broken.
    assert broken_links(document) == []


def test_the_documentation_has_a_contents_page_naming_every_page() -> None:
    # Given docs/README.md; Then it links every other page of docs/.
    contents = set(links(ROOT / "docs" / "README.md"))
    pages = {path.name for path in (ROOT / "docs").glob("*.md")} - {"README.md"}
    assert pages <= {target.partition("#")[0] for target in contents}


def test_a_missing_file_or_heading_is_reported(tmp_path: Path) -> None:
    # Given a document with good links, a link to a missing file, one to a missing heading,
    # and a look-alike link inside a code block and inline code.
    (tmp_path / "other.md").write_text("# Other page\n\n## Teams: per-queue access\n")
    document = tmp_path / "page.md"
    document.write_text(
        "# Page\n\n## Repeat\n\n## Repeat\n\n"
        "[ok](other.md#teams-per-queue-access) [self](#repeat-1) [file](other.md)\n"
        "[gone](missing.md) [no heading](other.md#teams) [no own heading](#nowhere)\n\n"
        "[unclosed](other.md in a sentence.\n\n"
        "`[code](nowhere.md)`\n\n```bash\n# [comment](nowhere.md)\n```\n"
    )
    # When its links are checked; Then exactly the four broken ones are reported, each saying why.
    assert broken_links(document) == [
        "missing.md: no such file",
        "other.md#teams: no heading #teams in other.md",
        "#nowhere: no heading #nowhere in page.md",
        f"{MALFORMED}[unclosed](other.md in a sentence.",
    ]


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Teams: per-queue access", "teams-per-queue-access"),
        ("Capture: why DynamoDB Streams → Lambda", "capture-why-dynamodb-streams--lambda"),
        ("5. Scale", "5-scale"),
        ("Parents' results", "parents-results"),
        ("The local runtime (`make run`)", "the-local-runtime-make-run"),
    ],
)
def test_anchors_follow_githubs_rules(heading: str, anchor: str) -> None:
    # Given a heading; When GitHub would render it; Then its anchor is this.
    assert github_anchor(heading) == anchor
