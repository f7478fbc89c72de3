"""The commands that README.md, configs/*/README.md and docs/*.md show stay true.

Cheap and without running anything heavy: every repository path a page names exists, every
``make`` target it names is in the Makefile, and every ``python tools/...`` command it shows
with concrete arguments (no placeholder such as ``CONFIG``) is accepted by that tool's
argument parser, which is stopped right after parsing.
"""
import argparse
import glob
import os.path as osp
import re
import runpy
import shlex
import sys
from typing import Iterator, List, Tuple

import pytest
from conftest import REPO_ROOT as ROOT

PAGES = sorted(
    osp.relpath(p, ROOT) for p in [osp.join(ROOT, 'README.md')] +
    glob.glob(osp.join(ROOT, 'configs', '*', 'README.md')) +
    glob.glob(osp.join(ROOT, 'docs', '*.md')))

# A repository path as the pages write it: a top-level folder of the repository, then a path
# without spaces, ending in a file extension or a slash.
REPO_PATH = re.compile(r'(?<![\w/.~:-])((?:configs|tools|docs|mmlinear|tests|demo|requirements)/'
                       r'[\w./+-]*\w(?:\.\w+|/))')
# Paths that are outputs or patterns, not files the repository holds.
GENERATED = ('mmlinear/_ext', 'mmlinear/.mim/configs', 'mmlinear/.mim/tools')
MAKE_TARGET = re.compile(r'`make ([a-z][\w-]*)')
# A token that stands for something the reader supplies.
PLACEHOLDER = re.compile(r'^[A-Z][A-Z0-9_]{1,}$|[\[\]<>{}]|\.\.\.|\$|\*')


def page_text(page: str) -> str:
    with open(osp.join(ROOT, page), encoding='utf-8') as f:
        return f.read()


def shell_lines(text: str) -> Iterator[str]:
    """Lines of the page's code (fenced or indented blocks and inline code spans), with
    backslash continuations joined and comments removed."""
    in_fence, pending = False, ''
    for raw in text.splitlines():
        if raw.lstrip().startswith('```'):
            in_fence = not in_fence
            continue
        candidates = [raw] if in_fence or raw.startswith('    ') else re.findall(r'`([^`]+)`', raw)
        for line in candidates:
            line = re.sub(r'\s#\s.*$', '', pending + ' ' + line.strip()).strip()
            if line.endswith('\\'):
                pending = line[:-1]
                continue
            pending = ''
            yield line


def documented_tool_commands() -> List[Tuple[str, List[str]]]:
    """(page, argv) of every concrete ``python tools/<tool>.py ...`` command on the pages."""
    commands = []
    for page in PAGES:
        for line in shell_lines(page_text(page)):
            try:
                tokens = shlex.split(line)
            except ValueError:
                continue
            while tokens and re.match(r'^[A-Z_]+=', tokens[0]):  # VAR=value prefixes
                tokens.pop(0)
            if len(tokens) < 2 or tokens[0] != 'python' or not tokens[1].startswith('tools/'):
                continue
            if any(PLACEHOLDER.search(t) for t in tokens) or '|' in tokens or '&&' in tokens:
                continue
            commands.append((page, tokens[1:]))
    return commands


TOOL_COMMANDS = documented_tool_commands()


class Parsed(Exception):
    """Raised by the patched parser once the arguments were accepted."""


@pytest.mark.parametrize('page', PAGES)
def test_every_repository_path_a_page_names_exists(page):
    missing = sorted({
        path
        for path in REPO_PATH.findall(page_text(page))
        if not path.startswith(GENERATED) and not osp.exists(osp.join(ROOT, path))
    })
    assert not missing, f'{page} names paths that do not exist: {missing}'


def test_every_make_target_the_pages_name_is_in_the_makefile():
    makefile = page_text('Makefile')
    targets = set(re.findall(r'^([a-z][\w-]*):', makefile, re.M))
    named = {(page, t) for page in PAGES for t in MAKE_TARGET.findall(page_text(page))}
    assert named, 'the pages name no make target: the pattern is broken'
    assert {t for _, t in named} >= {'demo', 'test', 'setup'}
    unknown = sorted((page, t) for page, t in named if t not in targets)
    assert not unknown, f'make targets named in the docs but not in the Makefile: {unknown}'


def test_the_pages_show_concrete_tool_commands():
    # The extraction itself: a broken pattern would make the parametrised test below vacuous.
    assert len(TOOL_COMMANDS) >= 10, TOOL_COMMANDS
    assert {argv[0]
            for _, argv in TOOL_COMMANDS} >= {
                'tools/train.py', 'tools/analysis_tools/benchmark.py',
                'tools/analysis_tools/get_flops.py'
            }


@pytest.mark.parametrize(
    'page,argv', TOOL_COMMANDS, ids=[' '.join(a)[:80] for _, a in TOOL_COMMANDS])
def test_documented_tool_command_is_accepted_by_its_parser(page, argv, monkeypatch, capsys):
    script = osp.join(ROOT, argv[0])
    assert osp.isfile(script), f'{page}: {argv[0]} does not exist'
    original = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, args=None, namespace=None):
        original(self, args, namespace)
        raise Parsed

    monkeypatch.setattr(argparse.ArgumentParser, 'parse_args', parse_then_stop)
    monkeypatch.setattr(sys, 'argv', argv)
    monkeypatch.chdir(ROOT)
    try:
        runpy.run_path(script, run_name='__main__')
    except Parsed:
        return
    except SystemExit as exit_:
        pytest.fail(f'{page}: `python {" ".join(argv)}` is refused by its parser '
                    f'(exit {exit_.code}): {capsys.readouterr().err.strip()}')
    pytest.fail(f'{page}: `python {" ".join(argv)}` finished without parsing arguments')
