"""A plan that says "fits" links; one that does not gets edgemem's paragraph, not the linker's (issues 31, 33).

The firmware's own static RAM (.data/.bss of the runtime, kernels and model) and its code share the regions the
plan fills. The oracle is ld itself: the same compiled project relinked with the region of the size in question
(a linker script edited here) either links or overflows, and the build's verdict must agree with it, for
several arena sizes around the boundary.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from edgemem import device_run, pipeline
from edgemem.analysis import analyze
from edgemem.errors import DoesNotFitError
from edgemem.plan import graph_plan

from small_models import dense_model, pointwise_model

pytestmark = pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="arm-none-eabi-gcc not installed")

RAM, STACK = 32768, 1024
FAST = dict(opt_seconds=0.0, schedule_seconds=0.2)
LINKER_TEXT = ("ld:", "collect2", "overflowed by", "will not fit in region", "Linker said")


def _options(**kw) -> pipeline.BuildOptions:
    return pipeline.BuildOptions(**FAST, **kw)


def _model(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / f"{name}.tflite"
    path.write_bytes(data)
    return path


def _links_with_ram(project: Path, ram: int) -> bool:
    """ld's verdict on the compiled project with its one RAM region ``ram`` bytes long (edgemem's ASSERTs too)."""
    script = project / "linker.ld"
    text = script.read_text()
    text = re.sub(r"(RAM_\w+ \(rw\) : ORIGIN = 0x[0-9A-F]+, LENGTH = )0x[0-9A-F]+", lambda m: f"{m.group(1)}0x{ram:X}", text)
    text = re.sub(r"exceed RAM region (\w+) \(\d+ bytes\)", r"exceed RAM region \1", text)  # a message only
    script.write_text(text)
    (project / "firmware.elf").unlink(missing_ok=True)
    proc = subprocess.run(["make", "-C", str(project), "firmware.elf"], capture_output=True, text=True)
    return proc.returncode == 0


def _assert_one_paragraph(message: str, *figures: str) -> None:
    assert "\n" not in message.strip(), message
    assert not any(t in message for t in LINKER_TEXT), message
    for f in figures:
        assert f in message, (f, message)


def test_build_says_fits_exactly_when_the_firmware_links(tmp_path):
    """--ram 32K, --stack 1K: 31,744 B for static data and the arena. Arenas from 31,744 - 320 B to 31,744 B,
    in 64 B steps across the static RAM (~200 B): before, an arena up to 31,744 B was planned as fitting and ld
    then refused it with its raw text."""
    verdicts = {}
    for width in range(982, 993, 2):  # arena = 2 * 16 * width: 31,424 .. 31,744 B
        model = _model(tmp_path, f"pw{width}", pointwise_model(width))
        roomy = pipeline.build(model, "stm32f746", tmp_path / f"roomy{width}", _options(ram=2 * RAM, stack=STACK))
        assert roomy.plan.total_bytes == 32 * width
        links = _links_with_ram(tmp_path / f"roomy{width}", RAM)
        try:
            tight = pipeline.build(model, "stm32f746", tmp_path / f"tight{width}", _options(ram=RAM, stack=STACK))
            says_fits, message = True, ""
        except DoesNotFitError as e:
            says_fits, message = False, str(e)
        verdicts[width] = (says_fits, links)
        assert says_fits == links, (width, message)
        # analyze, from the file alone: "fits" only where it links, "does not fit" only where it does not
        verdict = analyze(model, "stm32f746", ram=RAM, options=_options(stack=STACK)).verdict
        assert verdict != "fits" or links, (width, verdict)
        assert verdict != "does not fit" or not links, (width, verdict)
        if says_fits:
            elf = tmp_path / f"tight{width}" / "firmware.elf"
            assert elf.is_file() and tight.sizes.ram_bytes <= RAM
        else:
            used = roomy.sizes.stack_bytes + roomy.sizes.static_ram_bytes + roomy.sizes.arena_bytes
            _assert_one_paragraph(message, "RAM region", f"({RAM:,} B)", f"arena's pools {32 * width:,} B",
                                  f"stack {STACK:,} B", f".bss {roomy.sizes.bss_bytes:,} B")  # fmt: skip
            assert re.search(r"needs ([\d,]+) B there", message)
            assert int(re.search(r"needs ([\d,]+) B there", message).group(1).replace(",", "")) >= used > RAM - 16
            # nothing half-written: the refusal's own report only (report/refusal.py), no firmware
            left = {p.name for p in (tmp_path / f"tight{width}").iterdir()}
            assert left <= {"report.html", "refusal.json", ".edgemem-output"} and "firmware.elf" not in left, left
    assert {v[0] for v in verdicts.values()} == {True, False}, verdicts  # the sizes straddle the boundary


def test_pools_are_replanned_with_the_static_ram_the_linker_measured(tmp_path, monkeypatch):
    """--pool-per-region with an estimate of the static RAM that is too small (0 B): the default region's pool
    (DTCM, 64 KiB less the 16 KiB stack) is planned full, the link overflows by the static data, and the build
    plans again with the linker's figure (the arena then goes elsewhere) instead of failing."""
    monkeypatch.setattr(graph_plan, "STATIC_RESERVE", 0)
    model = _model(tmp_path, "pw", pointwise_model(1536))  # arena 49,152 B = DTCM less the stack, exactly
    result = pipeline.build(model, "stm32f746", tmp_path / "p", _options(pool_per_region=True))
    assert (tmp_path / "p" / "firmware.elf").is_file()
    assert result.plan.total_bytes == 49152
    assert result.plan.pool_sizes.get("dtcm", 0) + 16384 + result.sizes.static_ram_bytes <= 65536
    assert result.info["fits"]


def test_flash_overflow_is_refused_with_the_flash_figures(tmp_path):
    """60 KiB of weights under --flash 64K: the weights alone pass the early check, the code does not fit; the
    refusal names the flash size, the bytes needed and --flash (before: the linker's raw text)."""
    model = _model(tmp_path, "dense", dense_model(256, 240))
    with pytest.raises(DoesNotFitError) as e:
        pipeline.build(model, "stm32f746", tmp_path / "p", _options(flash=65536))
    message = str(e.value)
    _assert_one_paragraph(message, "has 65,536 B", "of flash", "--flash ")
    needed = int(re.search(r"needs ([\d,]+) B of flash", message).group(1).replace(",", ""))
    suggested = int(re.search(r"--flash (\d+)K", message).group(1)) * 1024
    roomy = pipeline.build(model, "stm32f746", tmp_path / "roomy", _options(flash=suggested))  # the way out works
    assert needed == roomy.sizes.flash_bytes > 65536  # the figure is the linked image's
    assert e.value.exit_code == 5
    cli = subprocess.run([sys.executable, "-m", "edgemem.cli", "build", "--board", "stm32f746", str(model), "-o",
                          str(tmp_path / "c"), "--flash", "64K", "--opt-time", "0"], capture_output=True, text=True)  # fmt: skip
    assert cli.returncode == 5 and "Traceback" not in cli.stderr, cli.stderr
    assert f"needs {needed:,} B of flash" in cli.stderr and not any(t in cli.stderr for t in LINKER_TEXT)
    # analyze, from the file alone, counts the code too: "does not fit" where the build refuses (it said "fits",
    # as the weights alone are under 64 KiB), "fits" where it links, and its range holds the linked figure
    small, large = (analyze(model, "stm32f746", flash=f, options=_options()) for f in (65536, suggested))
    assert small.weights_bytes < 65536 and small.verdict == "does not fit"
    assert large.verdict == "fits"
    assert small.flash_range_bytes[0] <= roomy.sizes.flash_bytes <= small.flash_range_bytes[1]


def test_stack_auto_is_sized_before_the_link_decides(tmp_path):
    """--stack auto plans with a 2 KiB stack until the compiler's call graph sizes it (~0.5 KiB here): an arena
    of exactly --ram less 2 KiB overflowed that first link by the static data and was refused with ld's text,
    though it fits once the stack is sized. Now the auto-sized link decides."""
    model = _model(tmp_path, "pw", pointwise_model(960))  # arena 30,720 B = 32 KiB less 2 KiB
    result = pipeline.build(model, "stm32f746", tmp_path / "p", _options(ram=RAM, stack="auto"))
    assert result.plan.total_bytes == RAM - 2048
    assert result.sizes.stack_bytes < 2048 and result.sizes.ram_bytes <= RAM
    assert (tmp_path / "p" / "firmware.elf").is_file() and result.info["fits"]


def test_the_static_estimate_never_refuses_a_model_that_fits(tmp_path):
    """--pool-per-region plans before linking with a 1 KiB estimate of the static RAM; an arena 512 B short of
    the region less the stack was refused by that estimate alone (exit 5), though the firmware's static data is
    ~200 B. Now the plan is tried with no estimate, and the link's figure decides."""
    model = _model(tmp_path, "pw", pointwise_model(976))  # arena 31,232 B = 32 KiB - 1 KiB stack - 512 B
    result = pipeline.build(model, "stm32f746", tmp_path / "p", _options(ram=RAM, stack=STACK, pool_per_region=True))
    assert result.plan.total_bytes == 31232 and result.sizes.ram_bytes <= RAM
    assert (tmp_path / "p" / "firmware.elf").is_file() and result.info["fits"]
    a = analyze(model, "stm32f746", ram=RAM, options=_options(stack=STACK, pool_per_region=True))
    assert a.arena_bytes == 31232 and a.verdict == "may not fit"  # it plans as the build does; the link decides


def test_default_stack_gives_way_to_the_call_graph_when_it_alone_overflows(tmp_path):
    """No --stack, --ram 32K: the board's 16 KiB default reservation leaves 16,384 B, the arena is exactly that,
    and the firmware's static data overflowed the link (exit 5 suggesting --stack auto; so was
    openmv_blazeface_front_128 on stm32f746, by 208 B). The default is a guess, not a need: the build now sizes
    the stack from the call graph as --stack auto does, says so in edgemem.json, and runs bit-exact within it.
    A reservation the user gave is kept (and refused)."""
    model = _model(tmp_path, "pw", pointwise_model(512))  # arena 16,384 B = 32 KiB less the 16 KiB stack
    with pytest.raises(DoesNotFitError, match="--stack auto"):
        pipeline.build(model, "stm32f746", tmp_path / "given", _options(ram=RAM, stack=16384))
    result = pipeline.build(model, "stm32f746", tmp_path / "p", _options(ram=RAM))
    st = result.info["stack"]
    assert result.plan.total_bytes == RAM - 16384 and result.info["fits"]
    assert st["auto"] and st["default_overflowed"]["default_stack_bytes"] == 16384
    assert "RAM region" in st["default_overflowed"]["refusal"]
    assert result.sizes.stack_bytes == st["reserved_bytes"] == st["bound_bytes"] + st["margin_bytes"] < 2048
    assert result.sizes.ram_bytes <= RAM and _links_with_ram(tmp_path / "p", RAM)  # ld agrees
    res = device_run.run(tmp_path / "p")
    assert res["bit_exact"] and res["peak_stack_bytes"] <= st["bound_bytes"]


def test_the_board_image_takes_the_same_stack_as_the_qemu_image(tmp_path):
    """nucleo-f401re (a board image too), --ram 32K, no --stack: the 8 KiB default overflows by the static data
    as above; both images get the call graph's stack, and the board image links within the same RAM."""
    model = _model(tmp_path, "pw", pointwise_model(768))  # arena 24,576 B = 32 KiB less the 8 KiB stack
    result = pipeline.build(model, "nucleo-f401re", tmp_path / "p", _options(ram=RAM))
    st, image = result.info["stack"], result.info["board_image"]
    assert st["auto"] and st["default_overflowed"]["default_stack_bytes"] == 8192 and st["reserved_bytes"] < 1024
    assert (tmp_path / "p" / image["elf"]).is_file()
    assert 24576 < image["ram_bytes"] < 24576 + result.sizes.static_ram_bytes + 2048 <= RAM
