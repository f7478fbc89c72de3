"""The inputs of a many-image run: files, folders (with or without a pattern) and list files,
each image once, and an output folder name per image that no other image takes."""
import pytest

from mmlinear.apis.image_batch import collect_inputs, image_stem, is_batch, output_names


def touch(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b'')
    return str(path)


def test_a_folder_gives_its_readable_images_sorted_and_a_pattern_selects(tmp_path):
    for name in ('b.tif', 'a.ome.tif', 'c.npy', 'notes.md', 'sub/d.tif'):
        touch(tmp_path / 'images' / name)
    folder = str(tmp_path / 'images')
    assert collect_inputs([folder]) == [f'{folder}/a.ome.tif', f'{folder}/b.tif', f'{folder}/c.npy']
    assert collect_inputs(
        [folder], '**/*.tif') == [f'{folder}/a.ome.tif', f'{folder}/b.tif', f'{folder}/sub/d.tif']
    with pytest.raises(FileNotFoundError, match=r"no files matching '\*.png' in the folder"):
        collect_inputs([folder], '*.png')


def test_the_output_folder_is_never_an_input(tmp_path):
    image = touch(tmp_path / 'scene.tif')
    touch(tmp_path / 'out' / 'scene' / 'class_map.tif')
    assert collect_inputs([str(tmp_path)], '**/*.tif', exclude=str(tmp_path / 'out')) == [image]


def test_a_list_file_is_read_relative_to_its_folder_and_each_image_kept_once(tmp_path):
    first = touch(tmp_path / 'data' / 'one.tif')
    listing = tmp_path / 'data' / 'inputs.txt'
    listing.write_text('# scenes\none.tif\n\n missing.tif \n')
    assert collect_inputs([str(listing), first]) == [first, str(tmp_path / 'data' / 'missing.tif')]
    with pytest.raises(FileNotFoundError, match='no list file'):
        collect_inputs([str(tmp_path / 'absent.txt')])


def test_one_file_is_not_a_batch_but_a_folder_a_list_or_several_are(tmp_path):
    assert not is_batch(['scene.tif'])
    assert is_batch([str(tmp_path)]) and is_batch(['inputs.txt']) and is_batch(['a', 'b'])


def test_repeated_stems_take_a_hash_of_the_real_path_and_others_keep_theirs():
    assert image_stem('x/scene.ome.tiff') == 'scene' and image_stem('x/a.b.tif') == 'a.b'
    names = output_names(['north/scene.tif', 'south/scene.ome.tif', 'other.tif'])
    assert names[2] == 'other'
    assert names[0].startswith('scene-') and names[1].startswith('scene-')
    assert len(set(names)) == 3 and all(len(n) == len('scene-') + 8 for n in names[:2])
    assert output_names(['north/scene.tif', 'south/scene.ome.tif', 'other.tif']) == names
