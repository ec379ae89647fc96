"""The Python side of GpuTracking.TensorBoardReadsOurEventFiles: TensorBoard's own EventAccumulator
reads the folder of our event file, and every scalar, step, hyper-parameter, the text summary and
each image must be what the test logged (an image: the pixels of torch's own image() summary of the
same tensor, where Pillow is there to decode both).

    tensorboard_check.py --probe              exit 0 when tensorboard can be imported, 77 otherwise
    tensorboard_check.py RUN_DIR EXPECTED.json

EXPECTED.json: {"scalars": {tag: [[step, value], ...]}, "hparams": {name: value}, "text": [substrings],
"images": {tag: {"step": s, "shape": [N, C, H, W], "values": [...]}}}.
Exits 77 (the test is skipped) when python lacks tensorboard.
"""
import json
import struct
import sys

try:
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.plugins.hparams import plugin_data_pb2
except ImportError as e:
    print(f"SKIPPED: python has no tensorboard ({e})")
    sys.exit(77)

failures = []


def expect(condition: bool, message: str) -> None:
    if not condition:
        failures.append(message)


def float32(x: float) -> float:
    """TensorBoard's simple_value is a float32."""
    return struct.unpack("f", struct.pack("f", x))[0]


def check(run_dir: str, expected: dict) -> None:
    acc = event_accumulator.EventAccumulator(
        run_dir,
        size_guidance={event_accumulator.SCALARS: 0, event_accumulator.TENSORS: 0, event_accumulator.IMAGES: 0})
    acc.Reload()
    tags = acc.Tags()

    # Scalars: the same tags, and per tag the same (step, value) pairs in order.
    expect(sorted(tags["scalars"]) == sorted(expected["scalars"]),
           f"scalar tags {sorted(tags['scalars'])} != {sorted(expected['scalars'])}")
    for tag, points in expected["scalars"].items():
        if tag not in tags["scalars"]:
            continue
        got = [(e.step, e.value) for e in acc.Scalars(tag)]
        want = [(int(step), float32(value)) for step, value in points]
        expect(got == want, f"{tag}: read {got}, logged {want}")

    # Hyper-parameters: the HParams plugin's session start (values) and end (success).
    content = acc.PluginTagToContent("hparams")
    start_tag, end_tag = "_hparams_/session_start_info", "_hparams_/session_end_info"
    expect(start_tag in content and end_tag in content, f"hparams plugin tags {sorted(content)}")
    if start_tag in content:
        data = plugin_data_pb2.HParamsPluginData.FromString(content[start_tag])
        hparams = data.session_start_info.hparams
        expect(sorted(hparams.keys()) == sorted(expected["hparams"]),
               f"hparams {sorted(hparams.keys())} != {sorted(expected['hparams'])}")
        for name, value in expected["hparams"].items():
            if name not in hparams:
                continue
            v = hparams[name]
            if isinstance(value, bool):
                got = v.bool_value
            elif isinstance(value, (int, float)):
                got = v.number_value
            else:
                got = v.string_value
            expect(got == value, f"hparam {name}: read {got!r}, logged {value!r}")
    if end_tag in content:
        data = plugin_data_pb2.HParamsPluginData.FromString(content[end_tag])
        expect(data.session_end_info.status == 1, f"session end status {data.session_end_info.status}, not SUCCESS")

    # The hyper-parameters' table in the TEXT dashboard.
    text_tag = "hparams/text_summary"
    expect(text_tag in tags["tensors"], f"no {text_tag} among the tensor tags {tags['tensors']}")
    if text_tag in tags["tensors"]:
        events = acc.Tensors(text_tag)
        text = events[0].tensor_proto.string_val[0].decode("utf-8") if events else ""
        for needle in expected["text"]:
            expect(needle in text, f"the text summary lacks {needle!r}:\n{text}")

    # Images: one event per tag at its step, the size of torch's summary, and (with Pillow) its pixels.
    for tag, image in expected.get("images", {}).items():
        expect(tag in tags["images"], f"no image {tag} among {tags['images']}")
        if tag not in tags["images"]:
            continue
        events = acc.Images(tag)
        expect([e.step for e in events] == [image["step"]], f"{tag}: steps {[e.step for e in events]}")
        check_image(tag, events[0], image)

    counts = {tag: len(acc.Scalars(tag)) for tag in tags["scalars"]}
    print(f"EventAccumulator read {run_dir}: scalars {counts}, {len(expected['hparams'])} hparams, text summary")


def check_image(tag: str, event, image: dict) -> None:
    """The image against torch's own image() summary of the same tensor (which needs Pillow)."""
    try:
        import io
        from PIL import Image
    except ImportError:
        print(f"{tag}: no Pillow here, the pixels are not compared with torch's")
        return
    import torch
    from torch.utils.tensorboard.summary import image as torch_image

    tensor = torch.tensor(image["values"], dtype=torch.float32).reshape(image["shape"])
    theirs = torch_image(tag, tensor).value[0].image
    expect((event.width, event.height) == (theirs.width, theirs.height),
           f"{tag}: {event.width}x{event.height}, torch's {theirs.width}x{theirs.height}")
    ours = Image.open(io.BytesIO(event.encoded_image_string))
    torchs = Image.open(io.BytesIO(theirs.encoded_image_string))
    expect(ours.mode == torchs.mode and ours.tobytes() == torchs.tobytes(), f"{tag}: pixels differ from torch's")


def main() -> None:
    if sys.argv[1:] == ["--probe"]:
        return
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[2]) as f:
        expected = json.load(f)
    check(sys.argv[1], expected)
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
