#!/usr/bin/env python3
"""Turns the C++ samples of one guide page into a translation unit that the build compiles.

    extract.py <page.md> <out.cpp> <source root>

Every ```cpp block of the page is compiled, in order, after the page's context header
docs/guide/samples/<page>.hpp (the types and objects its samples take as given: a model, a
signal group, `ctx`, `http`, ...; declared, never defined, since the unit is compiled and
not linked). How a block compiles is said by an HTML comment on the line before its fence,
which a reader of the rendered page does not see:

    <!-- compile: file -->             at namespace scope, as written (the default for a block
                                       that starts with #include)
    <!-- compile: function -->         statements: the body of a void function
    <!-- compile: coroutine -->        statements with co_await: the body of an
                                       asio::awaitable<void> coroutine
    <!-- compile: coroutine T -->      ... of an asio::awaitable<T> coroutine (e.g. a handler's
                                       statements that end in `co_return response`)
    <!-- compile: process -->          statements with co_await on ctx: the body of a
                                       keel::process::durable<void> handler
    <!-- compile: process T -->        ... of a durable<T> handler (statements with co_return x)
    <!-- compile: ... with PARAMS -->  any of the three above, its function taking PARAMS
                                       (e.g. `payments_api& payments`): names the block uses
                                       that the page's other samples declare otherwise
    <!-- compile: excerpt PATH -->     lines of PATH (relative to the source root; a file the
                                       build compiles elsewhere), in order, some left out

A block without a comment that does not start with #include is an error, as is a page with
blocks and no context header: a sample that cannot be checked is not shown. A block's
#include lines go to the top of the unit; the rest is compiled in namespace guide_samples,
where the context header declares what it provides. #line directives point the compiler's
errors at the page's own lines.
"""

import pathlib
import re
import sys

FENCE = re.compile(r"^(\s*)```(\S*)")
MODE = re.compile(r"^\s*<!--\s*compile:\s*(.*?)\s*-->\s*$")


class sample_error(Exception):
    pass


def blocks(page):
    """Yields (line of the first code line, mode or None, code lines) for each cpp block."""
    lines = page.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang = m.group(1), m.group(2)
        start = i + 1
        end = start
        while end < len(lines) and not lines[end].strip().startswith("```"):
            end += 1
        if lang == "cpp":
            mode = None
            if i > 0:
                mm = MODE.match(lines[i - 1])
                if mm:
                    mode = mm.group(1)
            code = [l[len(indent):] if l.startswith(indent) else l for l in lines[start:end]]
            yield start + 1, mode, code
        i = end + 1


def is_subsequence(needles, haystack):
    it = iter(haystack)
    return all(any(n == h for h in it) for n in needles)


def check_excerpt(page, line, code, path, root):
    source = root / path
    if not source.is_file():
        raise sample_error(f"{page}:{line}: the excerpt's file {path} does not exist")
    wanted = [l.rstrip() for l in code if l.strip()]
    have = [l.rstrip() for l in source.read_text().splitlines()]
    if not is_subsequence(wanted, have):
        raise sample_error(f"{page}:{line}: the block is not an excerpt of {path}: its lines "
                           "must appear there, in the same order")


def wrap(page, line, mode, code, n):
    """The block as C++ text, wrapped as its mode says."""
    at = f'#line {line} "{page}"'
    body = "\n".join(code)
    mode, _, params = mode.partition(" with ")
    kind, _, result = mode.strip().partition(" ")
    result = result.strip()
    if kind == "file":
        return f"{at}\n{body}\n"
    if kind == "function":
        return f"[[maybe_unused]] inline void guide_sample_{n}({params}) {{\n{at}\n{body}\n}}\n"
    if kind in ("coroutine", "process"):
        outer = "asio::awaitable" if kind == "coroutine" else "keel::process::durable"
        value = result or "void"
        tail = "    co_return;\n" if value == "void" else ""
        return (f"[[maybe_unused]] inline {outer}<{value}> guide_sample_{n}({params}) {{\n{at}\n"
                f"{body}\n{tail}}}\n")
    raise sample_error(f"{page}:{line - 1}: unknown compile mode '{mode}'")


def translation_unit(page, root):
    context = page.parent / "samples" / (page.stem + ".hpp")
    parts = []
    includes = []
    found = False
    for n, (line, mode, code) in enumerate(blocks(page), start=1):
        if mode is None:
            first = next((l for l in code if l.strip()), "")
            if not first.startswith("#include"):
                raise sample_error(f"{page}:{line}: a ```cpp block needs a "
                                   "<!-- compile: ... --> line before its fence "
                                   "(docs/guide/samples/extract.py lists the modes)")
            mode = "file"
        if mode.startswith("excerpt "):
            check_excerpt(page, line, code, mode[len("excerpt "):].strip(), root)
            continue
        found = True
        includes += [l for l in code if l.startswith("#include")]
        code = ["" if l.startswith("#include") else l for l in code]
        parts.append(wrap(page, line, mode, code, n))
    if not found:
        return f"// {page.name} has no C++ samples to compile.\n"
    if not context.is_file():
        raise sample_error(f"{page}: its samples need a context header, {context}")
    head = [f"// Generated from {page.name} by docs/guide/samples/extract.py: do not edit.",
            # #line makes g++ take the page for a header, where a handler's lambda is a type
            # of internal linkage in a function of external linkage; and a sample may show
            # how a value is had without using it.
            '#pragma GCC diagnostic ignored "-Wsubobject-linkage"',
            '#pragma GCC diagnostic ignored "-Wunused-variable"',
            *includes, f'#include "{context.name}"', "", "namespace guide_samples {", ""]
    return "\n".join(head) + "\n".join(parts) + "\n}  // namespace guide_samples\n"


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    page, out, root = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
    try:
        text = translation_unit(page.resolve(), root.resolve())
    except sample_error as e:
        sys.exit(f"error: {e}")
    if not out.exists() or out.read_text() != text:
        out.write_text(text)


if __name__ == "__main__":
    main()
