"""What the board offers, and the checks against it that run before the expensive stages.

    board_with_budget(board, ram, flash)   the board with the user's --ram/--flash, validated where they enter
    with_stack(board, stack)               the board with the user's --stack reservation
    ram_budget(board)                      bytes for .data, .bss and the arena once the stack is reserved
    check_floor(model_path, board, ...)    refuse, before lowering, what no memory pass can make fit
    check_flash(graph, board, ...)         refuse weights larger than the flash
    file_order_plan(model, align)          a plan of the file's operator order, in milliseconds
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from .board import Board
from .errors import DoesNotFitError, EdgememError


def board_with_budget(board: Board, ram: int | None, flash: int | None) -> Board:
    """The board with its RAM and/or flash replaced by the user's figures (one RAM region for --ram)."""
    if flash is not None and flash <= 0:
        raise EdgememError(f"--flash {flash} is not a size: give the flash budget in bytes or with a unit, e.g. --flash 1M.")
    if ram is not None and ram <= board.stack_size:
        raise EdgememError(
            f"--ram {ram:,} leaves nothing next to board {board.name}'s {board.stack_size:,}-byte stack: give the "
            f"RAM budget (bytes or with a unit) more than the stack, e.g. --ram {board.ram_bytes // 1024}K."
        )
    for what, size, region in (("--ram", ram, board.default_ram), ("--flash", flash, board.flash)):
        if size is not None and region.base + size > 1 << 32:  # before the MPU and linker code that assume it
            raise EdgememError(
                f"{what} {size:,} does not fit a 32-bit microcontroller: board {board.name}'s {region.name} starts at "
                f"0x{region.base:08X}, so {size:,} bytes would end beyond the 4 GiB address space. Give a size the "
                f"board could have, e.g. {what} {(board.ram_bytes if what == '--ram' else board.flash_bytes) // 1024}K "
                "(its own)."
            )
        if size is not None and size % 32:  # checked here, not deep in the MPU code that needs it
            raise EdgememError(
                f"{what} {size:,} is not a multiple of 32 bytes, which the memory protection regions and the linker "
                f"script need: use {size // 32 * 32:,} or {(size // 32 + 1) * 32:,}."
            )
    if flash is not None:
        board = dataclasses.replace(board, flash=dataclasses.replace(board.flash, size=flash))
    if ram is not None:
        region = dataclasses.replace(board.default_ram, size=ram, default=True)
        board = dataclasses.replace(board, ram=(region,))
    from .target.image import check_budget

    check_budget(board, ram, flash)  # the MPU map of the image must express them too
    return board


# What ``--stack auto`` plans for until the call graph sizes it after compiling (target/stack.py): the shared
# models' bounds + margin are 464 B (VWW) to 800 B (MobileNetV2-224); the relink with the real figure is checked
# by the linker, which refuses (exit 5) a stack that outgrew this. Planning with the board's own reservation
# (16 KiB on stm32f746) instead refused VWW under --ram 48K, where it fits in 38 KB (issue 33).
AUTO_STACK_PLANNED = 2048


def with_stack(board: Board, stack: int | str | None) -> Board:
    """The board with the user's stack reservation (``--stack``): bytes, or "auto" (sized after compiling;
    until then AUTO_STACK_PLANNED, or the board's own reservation if smaller)."""
    if stack is None:
        return board
    if stack == "auto":
        return dataclasses.replace(board, stack_size=min(board.stack_size, AUTO_STACK_PLANNED))
    if not isinstance(stack, int) or stack <= 0 or stack % 8:
        raise EdgememError(f"--stack {stack} is not a stack size: give a positive multiple of 8 bytes (with a unit: "
                           "--stack 4K) or --stack auto.")  # fmt: skip
    return dataclasses.replace(board, stack_size=stack)


def ram_budget(board: Board) -> int:
    """Bytes the default RAM region offers to data, bss and the arena once the stack is reserved."""
    from .target.image import qemu_image

    return qemu_image(board).default_region.length - board.stack_size


def check_floor(model_path: Path, board: Board, passes: tuple[str, ...], input_outside: bool = False) -> None:
    """Fail before lowering when even the largest single operator cannot fit the board, whatever the memory
    passes that may run (``passes``, catalogue names) remove (each declares it: passes/catalogue.py,
    memory/floor.py), patch stages included when ``patches`` may run (its floor: the model input, none with
    ``input_outside``)."""
    from .frontend.footprint import op_names, operator_floor_bytes
    from .frontend.tflite_import import read_tflite
    from .passes.catalogue import floor_capabilities

    model = read_tflite(model_path)
    passes = [n for n in passes if floor_capabilities((n,))]  # those that may remove bytes
    caps = floor_capabilities(passes, model, input_outside)
    floor, op_index = operator_floor_bytes(model, capabilities=caps)
    budget = ram_budget(board)
    if floor > budget:
        plan_bytes, algorithm = file_order_plan(model, board.arena_align)
        err = DoesNotFitError(
            f"{model_path.name} needs at least {floor:,} bytes of activation RAM (operator #{op_index} "
            f"{op_names(model)[op_index]} alone keeps that much live whatever the memory passes that may run "
            f"({', '.join(passes) or 'none'}) remove{patch_assumption(model, caps, input_outside)}, so no operator "
            f"order or placement can use less) but board {board.name} has {budget:,} bytes left after its "
            f"{board.stack_size:,}-byte stack ({board.ram_bytes:,} B of RAM in all). Best plan found: the file's "
            f"operator order placed by {algorithm}, {plan_bytes:,} B; operator reordering and the placement searches "
            "were skipped, as none can beat that floor. Use a board with more RAM, a smaller input resolution, or "
            "--ram to plan for a larger budget."
        )
        # report.html of the refusal (report/refusal.py), written by the build into its output directory
        err.floor_bytes, err.budget_bytes = floor, budget  # the ways out compare their floors with this
        err.refusal = lambda: _refusal_facts(model_path, board, passes, floor, op_index, budget, input_outside)
        raise err


def _refusal_facts(model_path, board, passes, floor, op_index, budget, input_outside) -> dict:
    from .report.refusal import floor_refusal

    return floor_refusal(model_path, board, passes, floor, op_index, budget, input_outside)


def patch_assumption(model, capabilities, input_outside: bool = False) -> str:
    """What the floor assumed of the patch pass, as a clause ("" when it may not run or splits nothing)."""
    from .frontend.footprint import patch_stage_ops

    ops = patch_stage_ops(model, capabilities)
    if not ops:
        return ""
    held = "nothing (the input is outside the arena)" if input_outside else "only the model input"
    return (f"; assumed: operators #{ops[0]}..#{ops[-1]} may run tile by tile in a patch stage (patches, rolling "
            f"rows), holding {held}, whatever the MAC limit")


def file_order_plan(model, align: int) -> tuple[int, str]:
    """Arena of the file's operator order with the cheap placements: what a plan would need, in milliseconds."""
    from .frontend.footprint import file_order_live_ranges
    from .plan import Buffer, plan_arena

    ranges = file_order_live_ranges(model)
    buffers = [Buffer(f"{i}:{name}", max(size, 1), first, last, align) for i, (name, size, first, last) in enumerate(ranges)]
    plan = plan_arena(buffers, algorithms=["greedy_by_size", "greedy_by_conflicts"])
    return plan.total_bytes, plan.algorithm


def check_flash(graph, board: Board, model_name: str) -> None:
    """Refuse a model whose weights alone exceed the board's flash (before planning and code generation)."""
    weights = sum(t.nbytes for t in graph.constants())
    if weights > board.flash_bytes:
        raise DoesNotFitError(
            f"{model_name} has {weights:,} bytes of weights but board {board.name} has {board.flash_bytes:,} "
            "bytes of flash. Use a board with more flash or a smaller model (or --flash to override)."
        )
