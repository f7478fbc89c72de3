"""The deprecation shims: a retired spelling warns, names the new one and gives the same
result; giving both spellings is refused."""
import argparse
import sys
import types

import pytest

from mmlinear.utils.deprecation import (RenamedFlag, renamed_arguments, renamed_attributes,
                                        renamed_keys, warn_renamed)


@renamed_arguments(old_rows='rows')
def scaled(x, *, rows=1, scale=1):
    return x * rows * scale


def test_warning_names_both_spellings_and_the_caller():
    with pytest.warns(FutureWarning, match=r"where: 'old' is deprecated .* use 'new'") as record:
        warn_renamed('old', 'new', 'where', stacklevel=1)
    assert record[0].filename == __file__


def test_renamed_keyword_warns_and_gives_the_same_result():
    with pytest.warns(FutureWarning, match=r"scaled\(\): 'old_rows' .* use 'rows'") as record:
        assert scaled(2, old_rows=3, scale=5) == scaled(2, rows=3, scale=5) == 30
    assert record[0].filename == __file__  # the warning points at the caller


def test_new_keyword_does_not_warn(recwarn):
    assert scaled(2, rows=3) == 6
    assert not recwarn.list
    assert scaled.__name__ == 'scaled' and scaled.__wrapped__(2, rows=4) == 8


def test_both_spellings_are_refused():
    with pytest.raises(TypeError, match="both 'old_rows' and its new spelling 'rows'"):
        scaled(2, old_rows=3, rows=3)


def test_renamed_config_keys():
    with pytest.warns(FutureWarning, match="test_cfg: 'chunk' .* use 'rows'"):
        cfg = renamed_keys(dict(chunk=4, mode='x'), dict(chunk='rows'), 'test_cfg')
    assert cfg == dict(rows=4, mode='x')
    assert renamed_keys(dict(rows=4), dict(chunk='rows'), 'test_cfg') == dict(rows=4)


def test_renamed_flag():
    parser = argparse.ArgumentParser(prog='tool')
    parser.add_argument('--rows', type=int, default=7)
    parser.add_argument(
        '--old-rows',
        type=int,
        dest='rows',
        action=RenamedFlag,
        new='--rows',
        help=argparse.SUPPRESS)
    with pytest.warns(FutureWarning, match="tool: '--old-rows' .* use '--rows'"):
        assert parser.parse_args(['--old-rows', '3']).rows == 3
    assert parser.parse_args(['--rows', '3']).rows == 3
    assert parser.parse_args([]).rows == 7


def test_renamed_module_attribute(monkeypatch):
    module = types.ModuleType('shimmed')
    module.new_name = object()
    module.__getattr__ = renamed_attributes(vars(module), dict(old_name='new_name'))
    monkeypatch.setitem(sys.modules, 'shimmed', module)
    with pytest.warns(FutureWarning, match="shimmed: 'old_name' .* use 'new_name'"):
        from shimmed import old_name
    assert old_name is module.new_name
    with pytest.raises(AttributeError, match="no attribute 'other'"):
        module.other
