"""A pickle reader for plain data only, with limits: safe by construction, not by inspection.

Python's unpickler can run code (a pickle names any callable and its arguments). This one is a
small interpreter of the opcodes that build plain data (None, bools, ints, floats, str, bytes,
lists, tuples, dicts, sets and the memo that shares them) and nothing else: any opcode that asks
for a class, a function or a persistent object stops it. It also stops, with a reason, when the
input nests deeper than ``max_depth``, builds more than ``max_items`` values (references to shared
values count each time, so a "billion laughs" stops early), or runs longer than ``max_seconds``.
It never recurses, so deep nesting cannot overflow the interpreter's stack.
"""
from __future__ import annotations

import codecs
import struct
import time

from ..errors import DumpProblem, UnsafeDump

__all__ = ["load_plain", "MAX_DEPTH", "MAX_ITEMS", "MAX_SECONDS"]

MAX_DEPTH = 100
MAX_ITEMS = 4_000_000
MAX_SECONDS = 10.0

_REFUSED = {
    ord("c"): "GLOBAL", ord("\x93"): "STACK_GLOBAL", ord("R"): "REDUCE", ord("b"): "BUILD", ord("i"): "INST",
    ord("o"): "OBJ", ord("\x81"): "NEWOBJ", ord("\x92"): "NEWOBJ_EX", ord("\x82"): "EXT1", ord("\x83"): "EXT2",
    ord("\x84"): "EXT4", ord("\x97"): "NEXT_BUFFER", ord("\x98"): "READONLY_BUFFER",
}
_PERSISTENT = {ord("P"), ord("Q")}
_CONTAINERS = (dict, list, tuple, set, frozenset)


class _Stop(Exception):
    pass


def load_plain(data: bytes, *, max_depth: int = MAX_DEPTH, max_items: int = MAX_ITEMS,
               max_seconds: float = MAX_SECONDS) -> object:
    """The value a pickle of plain data holds. Raises :class:`UnsafeDump` for a pickle that asks
    for anything else, :class:`DumpProblem` for one that is malformed or over a limit."""
    try:
        return _run(data, max_depth, max_items, max_seconds)
    except (UnsafeDump, DumpProblem):
        raise
    except (IndexError, struct.error):
        raise DumpProblem("truncated pickle") from None
    except (TypeError, ValueError, KeyError, AttributeError, UnicodeDecodeError, OverflowError) as exc:
        raise DumpProblem(f"malformed pickle ({exc.__class__.__name__}: {str(exc)[:120]})") from None


def _run(data: bytes, max_depth: int, max_items: int, max_seconds: float) -> object:  # noqa: C901 - one opcode loop
    stack: list = []
    marks: list[list] = []
    memo: dict[int, object] = {}
    depth: dict[int, int] = {}  # id(container) -> nesting depth
    items, next_check = 0, 0x2000
    deadline = time.monotonic() + max_seconds
    i, n = 0, len(data)
    unpack = struct.unpack_from

    def nest(container: object, child: object) -> None:
        """A container holds another one: its depth is at least one more than the child's."""
        d = depth.get(id(child), 0) + 1
        if d > depth.get(id(container), 0):
            if d > max_depth:
                raise DumpProblem(f"nested more than {max_depth} levels deep: not a Flight Recorder dump")
            depth[id(container)] = d

    def pop_mark() -> list:
        nonlocal stack
        if not marks:
            raise DumpProblem("malformed pickle (no MARK)")
        top, stack = stack, marks.pop()
        return top

    while True:
        op = data[i]  # IndexError past the end: a truncated pickle
        i += 1
        items += 1
        if items >= next_check:
            next_check = items + 0x2000
            if items > max_items:
                raise DumpProblem(f"more than {max_items:,} values: not a Flight Recorder dump")
            if time.monotonic() > deadline:
                raise DumpProblem(f"took more than {max_seconds:g} s to read: not a Flight Recorder dump")
        if op == 0x68:  # h BINGET
            stack.append(memo[data[i]])
            i += 1
        elif op == 0x94:  # MEMOIZE
            memo[len(memo)] = stack[-1]
        elif op == 0x72:  # r LONG_BINPUT
            memo[unpack("<I", data, i)[0]] = stack[-1]
            i += 4
        elif op == 0x28:  # ( MARK
            marks.append(stack)
            stack = []
            if len(marks) > max_depth:
                raise DumpProblem(f"nested more than {max_depth} levels deep: not a Flight Recorder dump")
        elif op == 0x4B:  # K BININT1
            stack.append(data[i])
            i += 1
        elif op == 0x7D:  # } EMPTY_DICT
            stack.append({})
        elif op == 0x75:  # u SETITEMS
            pairs = pop_mark()
            target = stack[-1]
            if type(target) is not dict:
                raise DumpProblem("malformed pickle (SETITEMS on a non-dict)")
            for k in range(0, len(pairs) - 1, 2):
                value = pairs[k + 1]
                target[pairs[k]] = value
                if type(value) in _CONTAINERS:
                    nest(target, value)
        elif op == 0x8C:  # SHORT_BINUNICODE
            size = data[i]
            stack.append(data[i + 1:i + 1 + size].decode("utf-8", "surrogatepass"))
            i += 1 + size
        elif op == 0x58:  # X BINUNICODE
            (size,) = unpack("<I", data, i)
            stack.append(data[i + 4:i + 4 + size].decode("utf-8", "surrogatepass"))
            i += 4 + size
        elif op == 0x4A:  # J BININT
            stack.append(unpack("<i", data, i)[0])
            i += 4
        elif op == 0x4D:  # M BININT2
            stack.append(unpack("<H", data, i)[0])
            i += 2
        elif op == 0x71:  # q BINPUT
            memo[data[i]] = stack[-1]
            i += 1
        elif op == 0x6A:  # j LONG_BINGET
            stack.append(memo[unpack("<I", data, i)[0]])
            i += 4
        elif op == 0x5D:  # ] EMPTY_LIST
            stack.append([])
        elif op == 0x29:  # ) EMPTY_TUPLE
            stack.append(())
        elif op == 0x73:  # s SETITEM
            value, key = stack.pop(), stack.pop()
            target = stack[-1]
            if not isinstance(target, dict):
                raise DumpProblem("malformed pickle (SETITEM on a non-dict)")
            target[key] = value
            nest(target, value)
        elif op == 0x65:  # e APPENDS
            values = pop_mark()
            target = stack[-1]
            if not isinstance(target, list):
                raise DumpProblem("malformed pickle (APPENDS on a non-list)")
            target.extend(values)
            for value in values:
                nest(target, value)
        elif op == 0x61:  # a APPEND
            value = stack.pop()
            target = stack[-1]
            if not isinstance(target, list):
                raise DumpProblem("malformed pickle (APPEND on a non-list)")
            target.append(value)
            nest(target, value)
        elif op in (0x85, 0x86, 0x87):  # TUPLE1..3
            count = op - 0x84
            values = tuple(stack[-count:])
            if len(values) != count:
                raise DumpProblem("malformed pickle (short stack)")
            del stack[-count:]
            for value in values:
                nest(values, value)
            stack.append(values)
        elif op == 0x74:  # t TUPLE
            values = tuple(pop_mark())
            for value in values:
                nest(values, value)
            stack.append(values)
        elif op == 0x6C:  # l LIST
            values = pop_mark()
            for value in values:
                nest(values, value)
            stack.append(values)
        elif op == 0x64:  # d DICT
            pairs = pop_mark()
            built = {pairs[k]: pairs[k + 1] for k in range(0, len(pairs) - 1, 2)}
            for value in built.values():
                nest(built, value)
            stack.append(built)
        elif op == 0x4E:  # N NONE
            stack.append(None)
        elif op == 0x88:  # NEWTRUE
            stack.append(True)
        elif op == 0x89:  # NEWFALSE
            stack.append(False)
        elif op == 0x47:  # G BINFLOAT
            stack.append(unpack(">d", data, i)[0])
            i += 8
        elif op == 0x8A:  # LONG1
            size = data[i]
            stack.append(int.from_bytes(data[i + 1:i + 1 + size], "little", signed=True))
            i += 1 + size
        elif op == 0x8B:  # LONG4
            (size,) = unpack("<i", data, i)
            if size < 0 or size > 64:
                raise DumpProblem("malformed pickle (an integer of more than 64 bytes)")
            stack.append(int.from_bytes(data[i + 4:i + 4 + size], "little", signed=True))
            i += 4 + size
        elif op in (0x43, 0x55):  # C SHORT_BINBYTES, U SHORT_BINSTRING
            size = data[i]
            raw = data[i + 1:i + 1 + size]
            stack.append(raw if op == 0x43 else raw.decode("latin-1"))
            i += 1 + size
        elif op in (0x42, 0x54):  # B BINBYTES, T BINSTRING
            (size,) = unpack("<I", data, i)
            raw = data[i + 4:i + 4 + size]
            stack.append(raw if op == 0x42 else raw.decode("latin-1"))
            i += 4 + size
        elif op in (0x8D, 0x8E, 0x96):  # BINUNICODE8, BINBYTES8, BYTEARRAY8
            (size,) = unpack("<Q", data, i)
            if size > n:
                raise DumpProblem("truncated pickle")
            raw = data[i + 8:i + 8 + size]
            stack.append(raw.decode("utf-8", "surrogatepass") if op == 0x8D else raw if op == 0x8E else bytearray(raw))
            i += 8 + size
        elif op == 0x80:  # PROTO
            i += 1
        elif op == 0x95:  # FRAME (a length hint only)
            i += 8
        elif op == 0x2E:  # . STOP
            if len(stack) != 1:
                raise DumpProblem("malformed pickle (stack at STOP)")
            return stack[0]
        elif op == 0x30:  # 0 POP
            if stack:
                stack.pop()
            else:
                pop_mark()
        elif op == 0x31:  # 1 POP_MARK
            pop_mark()
        elif op == 0x32:  # 2 DUP
            stack.append(stack[-1])
        elif op == 0x8F:  # EMPTY_SET
            stack.append(set())
        elif op == 0x90:  # ADDITEMS
            values = pop_mark()
            target = stack[-1]
            if not isinstance(target, set):
                raise DumpProblem("malformed pickle (ADDITEMS on a non-set)")
            target.update(values)
        elif op == 0x91:  # FROZENSET
            stack.append(frozenset(pop_mark()))
        elif op in (0x49, 0x4C, 0x46, 0x53, 0x56, 0x70, 0x67):  # text opcodes of protocol 0
            end = data.index(b"\n", i)
            arg = data[i:end]
            i = end + 1
            if op == 0x49:  # I INT (I01 / I00 are True / False)
                stack.append(True if arg == b"01" else False if arg == b"00" else int(arg))
            elif op == 0x4C:  # L LONG
                stack.append(int(arg.rstrip(b"L")))
            elif op == 0x46:  # F FLOAT
                stack.append(float(arg))
            elif op == 0x53:  # S STRING
                if len(arg) < 2 or arg[:1] != arg[-1:] or arg[:1] not in (b"'", b'"'):
                    raise DumpProblem("malformed pickle (STRING without quotes)")
                stack.append(codecs.escape_decode(arg[1:-1])[0].decode("latin-1"))
            elif op == 0x56:  # V UNICODE
                stack.append(arg.decode("raw-unicode-escape"))
            elif op == 0x70:  # p PUT
                memo[int(arg)] = stack[-1]
            else:  # g GET
                stack.append(memo[int(arg)])
        elif op in _REFUSED:
            what = _REFUSED[op]
            if op == 0x63:  # GLOBAL names its module and name on two lines
                parts = data[i:i + 200].split(b"\n", 2)
                what = ".".join(p.decode("utf-8", "replace") for p in parts[:2])
            elif op == 0x93 and len(stack) >= 2 and all(isinstance(s, str) for s in stack[-2:]):
                what = f"{stack[-2]}.{stack[-1]}"
            raise UnsafeDump(
                f"refusing to load {what} from a Flight Recorder dump: dumps hold only plain data (dict, list, "
                "tuple, str, int, float, bool, None); this file asks for a Python object, so it is not a genuine "
                "dump or it was tampered with")
        elif op in _PERSISTENT:
            raise UnsafeDump("refusing a pickle with persistent ids: not a Flight Recorder dump")
        else:
            raise DumpProblem(f"malformed pickle (unknown opcode 0x{op:02x})")
