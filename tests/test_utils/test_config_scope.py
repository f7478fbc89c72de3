"""``pkg::path`` config references resolve whichever distribution installed the toolbox: the
upstream one (``mmsegmentation``) or a continuation under another name
(``onedl-mmsegmentation``)."""
import importlib.metadata

from mmengine.config import utils as config_utils

from mmlinear.utils.config_scope import follow_renamed_distributions


def test_an_entry_whose_distribution_is_missing_follows_its_importable_module():
    table = {
        'mmseg': 'no-such-distribution-mmseg',  # module importable, distribution renamed
        'no_such_module': 'no-such-distribution',  # neither: left for mmengine to report
        'mmlinear': 'mmlinear',
    }
    follow_renamed_distributions(table)
    assert table == {
        'mmseg': 'mmseg',
        'no_such_module': 'no-such-distribution',
        'mmlinear': 'mmlinear'
    }


def test_an_installed_distribution_keeps_its_entry():
    name = importlib.metadata.distribution('torch').metadata['Name']
    table = {'torch_alias': name}
    follow_renamed_distributions(table)
    assert table == {'torch_alias': name}


def test_every_toolbox_scope_of_the_installed_stack_names_something_installed():
    # After importing mmlinear (the shim ran), each of the three toolboxes' scopes names a
    # distribution that is installed or a module that imports, on either stack.
    import mmlinear  # noqa: F401
    for module in ('mmdet', 'mmseg', 'mmpretrain'):
        entry = config_utils.MODULE2PACKAGE[module]
        try:
            importlib.metadata.distribution(entry)
        except importlib.metadata.PackageNotFoundError:
            assert entry == module, f'{module}: {entry} is neither installed nor the module'
