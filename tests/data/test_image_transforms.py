"""The per-image recipes of aot.data.image_transforms against independent computations: RandomResizedCrop's box
(torchvision's get_params, re-implemented here), resize + center crop, RandAugment's operations, CIFAR's pad-crop-flip,
mixup / CutMix (convex combinations, box swaps, split-invariance) and ImageRecipe's determinism."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

pytest.importorskip("PIL")

from PIL import Image

from aot.data.image_transforms import (
    ImageRecipe,
    Mixing,
    _apply_op,
    _magnitudes,
    pad_crop_flip,
    rand_augment,
    random_resized_crop,
    resize_center_crop,
)

OPS = (
    "Identity",
    "ShearX",
    "ShearY",
    "TranslateX",
    "TranslateY",
    "Rotate",
    "Brightness",
    "Color",
    "Contrast",
    "Sharpness",
    "Posterize",
    "Solarize",
    "AutoContrast",
    "Equalize",
)


def noise_image(width: int, height: int, mode: str = "RGB", seed: int = 0) -> Image.Image:
    rng = np.random.default_rng(seed)
    shape = (height, width) if mode == "L" else (height, width, 3)
    return Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8), mode=None).convert(mode)


def pixels(image: Image.Image) -> np.ndarray:
    return np.asarray(image, dtype=np.uint8)


# -- RandomResizedCrop ----------------------------------------------------------------------------------------


def reference_crop_box(width, height, rng, scale, ratio=(3 / 4, 4 / 3)):
    """torchvision's ``RandomResizedCrop.get_params`` written from its definition, drawing from a numpy Generator in
    the same order (area fraction, log-aspect, then top and left of a box that fits). Returns (left, top, w, h)."""
    area = height * width
    for _ in range(10):
        target_area = area * rng.uniform(scale[0], scale[1])
        aspect_ratio = math.exp(rng.uniform(math.log(ratio[0]), math.log(ratio[1])))
        w = round(math.sqrt(target_area * aspect_ratio))
        h = round(math.sqrt(target_area / aspect_ratio))
        if 0 < w <= width and 0 < h <= height:
            i = int(rng.integers(0, height - h + 1))
            j = int(rng.integers(0, width - w + 1))
            return j, i, w, h
    in_ratio = width / height
    if in_ratio < min(ratio):
        w = width
        h = round(w / min(ratio))
    elif in_ratio > max(ratio):
        h = height
        w = round(h * max(ratio))
    else:
        w, h = width, height
    return (width - w) // 2, (height - h) // 2, w, h


@pytest.mark.parametrize(
    ("width", "height", "scale"),
    [(50, 37, (0.08, 1.0)), (23, 61, (0.08, 1.0)), (40, 40, (0.5, 0.9)), (64, 48, (1.0, 1.0))],
)
def test_random_resized_crop_follows_torchvision_get_params(width, height, scale) -> None:
    image = noise_image(width, height, seed=width)
    boxes = set()
    for seed in range(25):
        out = random_resized_crop(image, 16, np.random.default_rng(seed), scale)
        assert out.size == (16, 16) and out.mode == "RGB"
        left, top, w, h = reference_crop_box(width, height, np.random.default_rng(seed), scale)
        assert left >= 0 and left + w <= width and top >= 0 and top + h <= height
        expected = image.resize((16, 16), Image.BILINEAR, box=(left, top, left + w, top + h))
        np.testing.assert_array_equal(pixels(out), pixels(expected))
        boxes.add((left, top, w, h))
    if scale == (1.0, 1.0):  # the whole 4:3 image, drawn or by the fallback
        assert boxes == {(0, 0, width, height)}
    else:
        assert len(boxes) > 15  # the box is drawn, not fixed


def test_random_resized_crop_falls_back_to_the_central_crop() -> None:
    # 100 x 10 with scale ~1: no box of aspect ratio in (3/4, 4/3) and area ~1000 fits in 10 rows in 10 tries
    image = noise_image(100, 10, seed=3)
    for seed in range(5):
        out = random_resized_crop(image, 8, np.random.default_rng(seed), (0.9, 1.0))
        assert reference_crop_box(100, 10, np.random.default_rng(seed), (0.9, 1.0)) == (43, 0, 13, 10)
        expected = image.resize((8, 8), Image.BILINEAR, box=(43, 0, 56, 10))  # w = round(10 * 4/3), centred
        np.testing.assert_array_equal(pixels(out), pixels(expected))
    tall = noise_image(10, 100, seed=4)
    out = random_resized_crop(tall, 8, np.random.default_rng(0), (0.9, 1.0))
    expected = tall.resize((8, 8), Image.BILINEAR, box=(0, 43, 10, 56))  # h = round(10 / (3/4)) = 13
    np.testing.assert_array_equal(pixels(out), pixels(expected))


# -- resize + center crop -------------------------------------------------------------------------------------


def test_resize_center_crop_is_resize_256_then_center_224() -> None:
    image = noise_image(500, 375, seed=1)
    out = resize_center_crop(image, 224, crop_pct=0.875)
    # torchvision Resize(256): short side 375 -> 256, long side int(256 * 500 / 375) = 341; CenterCrop(224):
    # top int(round((256 - 224) / 2)) = 16, left int(round((341 - 224) / 2)) = round(58.5) = 58
    expected = image.resize((341, 256), Image.BILINEAR).crop((58, 16, 58 + 224, 16 + 224))
    assert out.size == (224, 224)
    np.testing.assert_array_equal(pixels(out), pixels(expected))
    portrait = noise_image(375, 500, seed=2)
    expected = portrait.resize((256, 341), Image.BILINEAR).crop((16, 58, 16 + 224, 58 + 224))
    np.testing.assert_array_equal(pixels(resize_center_crop(portrait, 224)), pixels(expected))


def test_resize_center_crop_with_crop_pct_one_only_resizes_a_square() -> None:
    image = noise_image(48, 48, seed=5)
    out = resize_center_crop(image, 16, crop_pct=1.0)
    np.testing.assert_array_equal(pixels(out), pixels(image.resize((16, 16), Image.BILINEAR)))
    same = noise_image(16, 30, seed=6)
    np.testing.assert_array_equal(pixels(resize_center_crop(same, 16, 1.0)), pixels(same)[7:23])  # crop only


# -- RandAugment ----------------------------------------------------------------------------------------------


def test_magnitude_table_matches_torchvision_definitions() -> None:
    space = _magnitudes(31, 40, 20)
    assert list(space) == list(OPS)
    assert space["Posterize"][0][0] == 8 and space["Posterize"][0][30] == 4 and space["Posterize"][0][9] == 7
    assert space["Solarize"][0][0] == 255.0 and space["Solarize"][0][30] == 0.0
    assert space["TranslateX"][0][30] == pytest.approx(150 / 331 * 40)  # width
    assert space["TranslateY"][0][30] == pytest.approx(150 / 331 * 20)  # height
    assert space["Rotate"][0][30] == pytest.approx(30.0) and space["ShearX"][0][30] == pytest.approx(0.3)
    signed = {op for op, (_, s) in space.items() if s}
    assert signed == {"ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness", "Color", "Contrast",
                      "Sharpness"}  # fmt: skip


@pytest.mark.parametrize("mode", ["RGB", "L"])
def test_rand_augment_is_deterministic_per_seed_and_keeps_size_and_mode(mode: str) -> None:
    image = noise_image(30, 20, mode, seed=7)
    outs = []
    for seed in range(12):
        a = rand_augment(image, np.random.default_rng(seed), num_ops=2, magnitude=9)
        b = rand_augment(image, np.random.default_rng(seed), num_ops=2, magnitude=9)
        assert a.size == (30, 20) and a.mode == mode
        np.testing.assert_array_equal(pixels(a), pixels(b))
        outs.append(pixels(a).tobytes())
    assert len(set(outs)) > 6  # different seeds, different operations
    same = rand_augment(image, np.random.default_rng(0), num_ops=0)
    np.testing.assert_array_equal(pixels(same), pixels(image))


def test_rand_augment_draws_ops_uniformly_and_signs() -> None:
    """The op and sign drawn for each of num_ops come from the generator in torchvision's order: op, then the sign of
    a signed op; re-deriving the choices and applying _apply_op gives the same image."""
    image = noise_image(24, 24, seed=8)
    space = _magnitudes(31, 24, 24)
    for seed in range(20):
        rng = np.random.default_rng(seed)
        expected = image
        for _ in range(3):
            op = OPS[int(rng.integers(len(OPS)))]
            value = float(space[op][0][5])
            if space[op][1] and rng.random() < 0.5:
                value = -value
            expected = _apply_op(expected, op, value)
        out = rand_augment(image, np.random.default_rng(seed), num_ops=3, magnitude=5)
        np.testing.assert_array_equal(pixels(out), pixels(expected))


@pytest.mark.parametrize("mode", ["RGB", "L"])
@pytest.mark.parametrize("op", OPS)
def test_each_op_keeps_size_and_mode(op: str, mode: str) -> None:
    image = noise_image(21, 13, mode, seed=9)
    values = {"Posterize": (4, 8), "Solarize": (128.0, 0.0)}.get(op, (0.2, -0.2, 5.0))
    for value in values:
        out = _apply_op(image, op, value)
        assert out.size == image.size and out.mode == mode, (op, value)


def test_posterize_solarize_and_photometric_ops_against_numpy() -> None:
    array = np.arange(256, dtype=np.uint8).reshape(16, 16)
    gray = Image.fromarray(array)
    rgb = Image.fromarray(np.stack([array, array[::-1], array.T], axis=-1))
    for bits in (1, 4, 7, 8):
        mask = (0xFF << (8 - bits)) & 0xFF
        np.testing.assert_array_equal(pixels(_apply_op(gray, "Posterize", bits)), array & mask)
    for threshold in (0.0, 100.0, 178.5, 255.0):
        expected = np.where(array < threshold, array, 255 - array)
        np.testing.assert_array_equal(pixels(_apply_op(gray, "Solarize", threshold)), expected)
        np.testing.assert_array_equal(
            pixels(_apply_op(rgb, "Solarize", threshold)),
            np.where(pixels(rgb) < threshold, pixels(rgb), 255 - pixels(rgb)),
        )
    np.testing.assert_array_equal(pixels(_apply_op(gray, "Identity", 0.0)), array)
    flat = Image.fromarray(np.full((8, 8, 3), 100, dtype=np.uint8))
    assert (pixels(_apply_op(flat, "Brightness", 0.5)) == 150).all()  # blend with black by 1.5
    assert (pixels(_apply_op(flat, "Brightness", -0.9)) == 10).all()
    assert (pixels(_apply_op(flat, "Color", 0.9)) == 100).all()  # a gray image has no colour to change
    assert (pixels(_apply_op(flat, "Contrast", 0.9)) == 100).all()  # a flat image has no contrast to change
    low = Image.fromarray(np.arange(64, dtype=np.uint8).reshape(8, 8) + 100)  # 100..163
    stretched = pixels(_apply_op(low, "AutoContrast", 0.0))
    assert stretched.min() == 0 and stretched.max() >= 254  # PIL's lookup table truncates 254.99...
    assert np.all(np.diff(stretched.ravel().astype(int)) >= 0)  # monotone
    many = Image.fromarray(np.tile(np.arange(100, 164, dtype=np.uint8), (64, 1)))  # 64 of each of 100..163
    equalised = pixels(_apply_op(many, "Equalize", 0.0))
    assert equalised.min() == 0 and equalised.max() == 255 and len(np.unique(equalised)) > 50  # spread out
    assert (np.diff(equalised[0].astype(int)) >= 0).all() and (equalised == equalised[0]).all()  # by value only


def test_geometric_ops_move_pixels_as_torchvision_does() -> None:
    array = np.random.default_rng(10).integers(1, 256, (12, 20), dtype=np.uint8)  # no zero: 0 marks the fill
    image = Image.fromarray(array)
    right = pixels(_apply_op(image, "TranslateX", 5.7))  # int(5.7) = 5 pixels to the right
    np.testing.assert_array_equal(right[:, 5:], array[:, :-5])
    assert (right[:, :5] == 0).all()
    left = pixels(_apply_op(image, "TranslateX", -3.2))
    np.testing.assert_array_equal(left[:, :-3], array[:, 3:])
    assert (left[:, -3:] == 0).all()
    down = pixels(_apply_op(image, "TranslateY", 4.0))
    np.testing.assert_array_equal(down[4:], array[:-4])
    assert (down[:4] == 0).all()
    # ShearX / ShearY about the corner (0, 0), nearest neighbour: output pixel (x, y) reads the input at PIL's
    # inverse map of its centre, (x + m·y, y) for ShearX ((1, m, 0, 0, 1, 0)), (x, m·x + y) for ShearY
    for op, m in (("ShearX", 0.25), ("ShearX", -0.3), ("ShearY", 0.25), ("ShearY", -0.3)):
        expected = np.zeros_like(array)
        for y in range(12):
            for x in range(20):
                xi, yi = x + 0.5, y + 0.5
                xi, yi = (xi + m * yi, yi) if op == "ShearX" else (xi, m * xi + yi)
                if 0 <= xi < 20 and 0 <= yi < 12:
                    expected[y, x] = array[math.floor(yi), math.floor(xi)]
        np.testing.assert_array_equal(pixels(_apply_op(image, op, m)), expected, err_msg=f"{op} {m}")
    rotated = pixels(_apply_op(Image.fromarray(np.full((21, 21), 200, dtype=np.uint8)), "Rotate", 30.0))
    assert rotated[10, 10] == 200 and rotated[0, 0] == 0 and rotated[20, 20] == 0  # corners filled black
    np.testing.assert_array_equal(pixels(_apply_op(image, "Rotate", 0.0)), array)


# -- CIFAR's pad-crop-flip ------------------------------------------------------------------------------------


def test_pad_crop_flip_is_a_window_of_the_zero_padded_image() -> None:
    image = np.random.default_rng(11).integers(1, 256, (3, 8, 10), dtype=np.uint8)
    padded = np.pad(image, ((0, 0), (2, 2), (2, 2)))
    offsets, flips = set(), set()
    for seed in range(60):
        out = pad_crop_flip(image, np.random.default_rng(seed), padding=2, flip=True)
        rng = np.random.default_rng(seed)
        top, left = rng.integers(0, 5, size=2)
        flipped = rng.random() < 0.5
        window = padded[:, top : top + 8, left : left + 10]
        expected = window[:, :, ::-1] if flipped else window
        np.testing.assert_array_equal(out, expected)
        assert out.shape == image.shape and out.dtype == np.uint8 and out.flags.c_contiguous
        offsets.add((int(top), int(left)))
        flips.add(bool(flipped))
    assert {t for t, _ in offsets} == set(range(5)) and {x for _, x in offsets} == set(range(5))  # 0..2p inclusive
    assert flips == {True, False}
    np.testing.assert_array_equal(pad_crop_flip(image, np.random.default_rng(0), 0, False), image)
    unflipped = {pad_crop_flip(image, np.random.default_rng(s), 0, True).tobytes() for s in range(20)}
    assert unflipped == {image.tobytes(), image[:, :, ::-1].copy().tobytes()}


# -- mixup / CutMix -------------------------------------------------------------------------------------------


def batch(rows: int = 4, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    images = torch.rand(rows, 3, 8, 12, generator=generator) + torch.arange(rows).view(-1, 1, 1, 1)  # rows differ
    return images, torch.arange(rows) % 4  # distinct labels within each pair


def test_mixup_rows_are_convex_combinations_of_their_pair() -> None:
    images, labels = batch()
    mixing = Mixing(mixup=0.8, cutmix=0.0, prob=1.0, seed=3)
    for step in range(6):
        out, target = mixing(images, labels, 5, step=step, first_row=0)
        assert out.dtype == torch.float32 and target.shape == (4, 5)
        torch.testing.assert_close(target.sum(1), torch.ones(4, dtype=torch.float32))
        x = images.double()
        for a, z in ((0, 1), (2, 3)):
            lam = float(target[a, labels[a]])
            assert 0.0 <= lam <= 1.0
            assert float(target[z, labels[z]]) == pytest.approx(lam) and float(target[a, labels[z]]) == pytest.approx(
                1 - lam
            )
            torch.testing.assert_close(out[a].double(), lam * x[a] + (1 - lam) * x[z], rtol=0, atol=1e-5)
            torch.testing.assert_close(out[z].double(), lam * x[z] + (1 - lam) * x[a], rtol=0, atol=1e-5)


def test_cutmix_swaps_one_box_and_lambda_is_its_area() -> None:
    images, labels = batch()
    mixing = Mixing(mixup=0.0, cutmix=1.0, prob=1.0, seed=5)
    areas = set()
    for step in range(10):
        out, target = mixing(images, labels, 4, step=step, first_row=0)
        torch.testing.assert_close(target.sum(1), torch.ones(4))
        for a, z in ((0, 1), (2, 3)):
            changed = (out[a] != images[a]).any(0)
            assert torch.equal(changed, (out[z] != images[z]).any(0))
            torch.testing.assert_close(out[a][:, changed], images[z][:, changed], rtol=0, atol=0)
            torch.testing.assert_close(out[z][:, changed], images[a][:, changed], rtol=0, atol=0)
            torch.testing.assert_close(out[a][:, ~changed], images[a][:, ~changed], rtol=0, atol=0)
            ys, xs = torch.nonzero(changed, as_tuple=True)
            area = int(changed.sum())
            if area:
                box = (int(ys.max() - ys.min() + 1)) * (int(xs.max() - xs.min() + 1))
                assert box == area  # one rectangle
            lam = float(target[a, labels[a]])
            assert lam == pytest.approx(1 - area / (8 * 12), abs=1e-6)
            assert float(target[z, labels[z]]) == pytest.approx(lam, abs=1e-6)
            areas.add(area)
    assert len(areas) > 3


def test_switch_prob_and_prob_choose_the_kind_of_mixing() -> None:
    images, labels = batch(8)

    def kinds(mixing: Mixing) -> set[str]:
        seen = set()
        for step in range(12):
            out, _ = mixing(images, labels, 4, step=step, first_row=0)
            for a in range(0, 8, 2):
                if torch.equal(out[a], images[a]):
                    seen.add("none")
                elif ((out[a] == images[a]) | (out[a] == images[a + 1])).all():
                    seen.add("cutmix")
                else:
                    seen.add("mixup")
        return seen

    assert kinds(Mixing(mixup=0.8, cutmix=1.0, switch_prob=1.0)) <= {"cutmix", "none"}
    assert kinds(Mixing(mixup=0.8, cutmix=1.0, switch_prob=0.0)) == {"mixup"}
    assert kinds(Mixing(mixup=0.8, cutmix=1.0, switch_prob=0.5)) >= {"mixup", "cutmix"}
    assert kinds(Mixing(mixup=0.8, prob=0.5)) == {"mixup", "none"}
    assert not Mixing().active and not Mixing(mixup=0.8, prob=0.0).active and Mixing(cutmix=1.0).active


@pytest.mark.parametrize("kind", [{"mixup": 0.8}, {"cutmix": 1.0}, {"mixup": 0.8, "cutmix": 1.0}])
def test_mixing_a_micro_batch_equals_those_rows_of_the_whole_batch(kind) -> None:
    images, labels = batch(8, seed=1)
    mixing = Mixing(**kind, prob=0.9, seed=7)
    for step in range(5):
        whole, whole_target = mixing(images, labels, 4, step=step, first_row=0)
        for first in (2, 4, 6):
            part, part_target = mixing(images[first : first + 2], labels[first : first + 2], 4, step, first)
            assert torch.equal(part, whole[first : first + 2])
            assert torch.equal(part_target, whole_target[first : first + 2])
        again, _ = mixing(images, labels, 4, step=step, first_row=0)
        assert torch.equal(again, whole)
    other, _ = mixing(images, labels, 4, step=0, first_row=0)
    assert not torch.equal(other, mixing(images, labels, 4, step=1, first_row=0)[0])  # each step draws anew
    assert not torch.equal(other, Mixing(**kind, prob=0.9, seed=8)(images, labels, 4, 0, 0)[0])  # and each seed


# -- ImageRecipe ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("source_mode", ["RGB", "L", "RGBA", "CMYK", "P"])
@pytest.mark.parametrize("mode", ["RGB", "L"])
def test_recipe_converts_any_mode_and_any_size(source_mode: str, mode: str) -> None:
    image = noise_image(37, 23, seed=12).convert(source_mode)
    channels = 3 if mode == "RGB" else 1
    for recipe in (
        ImageRecipe(size=16, mode=mode, randaug_ops=2),
        ImageRecipe(size=16, mode=mode, augment="pad-crop", padding=2),
    ):
        for rng in (None, np.random.default_rng(0)):
            out = recipe(image, rng)
            assert out.shape == (channels, 16, 16) and out.dtype == np.uint8


def test_recipe_eval_path_is_deterministic_and_training_depends_only_on_the_generator() -> None:
    image = noise_image(45, 31, seed=13)
    recipe = ImageRecipe(size=16, randaug_ops=2, randaug_magnitude=9)
    first = recipe(image, None)
    np.testing.assert_array_equal(first, recipe(image, None))
    np.testing.assert_array_equal(first, pixels(resize_center_crop(image, 16, 0.875)).transpose(2, 0, 1))
    trained = [recipe(image, np.random.default_rng([4, s])) for s in range(8)]
    for s in range(8):
        np.testing.assert_array_equal(trained[s], recipe(image, np.random.default_rng([4, s])))
    assert len({t.tobytes() for t in trained}) == 8
    # the training path is crop, flip, RandAugment drawn in that order from the one generator
    rng = np.random.default_rng(21)
    expected = random_resized_crop(image, 16, rng, (0.08, 1.0))
    if rng.random() < 0.5:
        expected = expected.transpose(Image.FLIP_LEFT_RIGHT)
    expected = rand_augment(expected, rng, 2, 9)
    np.testing.assert_array_equal(recipe(image, np.random.default_rng(21)), pixels(expected).transpose(2, 0, 1))


def test_pad_crop_recipe_resizes_other_sizes_then_pads() -> None:
    image = noise_image(20, 20, "L", seed=14)
    recipe = ImageRecipe(size=16, mode="L", augment="pad-crop", padding=2)
    resized = pixels(image.resize((16, 16), Image.BILINEAR))[None]
    np.testing.assert_array_equal(recipe(image, None), pixels(resize_center_crop(image, 16, 0.875))[None])
    out = recipe(image, np.random.default_rng(3))
    np.testing.assert_array_equal(out, pad_crop_flip(resized, np.random.default_rng(3), 2, True))
