"""Checks that docs/dsl.md's Functions table and the fuzzer's dictionary list
exactly the DSL's built-in functions.

usage: check_builtins.py LISTING DSL_MD DICT

LISTING is the output of `coda-translate --list-epilogue-builtins` (name,
family, signature, tab-separated). Every signature must appear as a code span
in the first column of the Functions table of DSL_MD and no other, and every
name must be a token of DICT; the dictionary's other words must be the DSL's
keywords or operand names of the examples (OTHER_WORDS).
"""

import re
import sys

# Identifiers of the dictionary that are not functions.
OTHER_WORDS = {"EPILOGUE", "input", "output", "seed", "residual", "bias",
               "bf16", "f16", "f32", "M", "N"}


def documented_signatures(markdown):
    """The code spans of the first column of the table under '## Functions'."""
    lines = markdown.split("\n")
    start = lines.index("## Functions")
    signatures = []
    in_table = False
    for line in lines[start + 1:]:
        if line.startswith("|"):
            in_table = True
            first = line.split("|")[1]
            signatures += re.findall(r"`([^`]*)`", first)
        elif in_table:
            break
    return signatures


def main():
    listing, dsl_md, dictionary = sys.argv[1:]
    builtins = [line.split("\t") for line in open(listing).read().splitlines()]
    names = [name for name, _, _ in builtins]
    signatures = [signature for _, _, signature in builtins]

    failed = False
    documented = documented_signatures(open(dsl_md).read())
    for signature in signatures:
        if signature not in documented:
            print(f"docs/dsl.md does not list {signature}")
            failed = True
    for signature in documented:
        if signature not in signatures:
            print(f"docs/dsl.md lists {signature}, which is not a function")
            failed = True

    tokens = set(re.findall(r'^"(.*)"$', open(dictionary).read(), re.M))
    for name in names:
        if name not in tokens:
            print(f"coda.dict lacks the function {name}")
            failed = True
    for token in sorted(tokens):
        if (re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", token)
                and token not in names and token not in OTHER_WORDS):
            print(f"coda.dict has the word {token}, which is not a function")
            failed = True

    if failed:
        sys.exit(1)
    print(f"{len(names)} functions, documented and in the dictionary")


main()
