"""accel_round's timing for the list cycle model (:mod:`codesign.step.list_shell`): the registers of
``rtl/accel/accel_round.v`` that decide when an accumulator enters and a word leaves (valid bits, counters),
never the data. A cycle computes the handshakes from the registers, then :meth:`RoundStage.edge` steps them.
Units: clock cycles, accumulators (values), 32-bit words."""

from __future__ import annotations


class RoundStage:
    """accel_round's valid bits and counters (stages A, B, C, the group G and the output register O), taking up to
    ``parts`` accumulators a cycle (its PARTS: a chunk never crosses a group's end) and sending up to ``parts``
    words a cycle."""

    __slots__ = ("busy", "left", "lane", "pos", "a", "a_end", "b", "b_end", "c", "c_end", "g_full", "o_left",
                 "enable", "lanes", "words", "row", "parts", "wide", "a_n", "b_n", "c_n", "g_n")

    def __init__(self, parts: int = 1) -> None:
        self.busy = self.a = self.a_end = self.b = self.b_end = self.c = self.c_end = self.g_full = False
        self.left = self.lane = self.pos = self.o_left = 0
        self.enable, self.lanes, self.words, self.row, self.parts, self.wide = False, 1, 1, 1, parts, False
        self.a_n = self.b_n = self.c_n = self.g_n = 0  # values of the chunk in A, B, C, and of G's last

    def state(self) -> tuple:
        return (self.busy, self.left, self.lane, self.pos, self.a, self.a_end, self.b, self.b_end, self.c,
                self.c_end, self.g_full, self.o_left, self.a_n, self.b_n, self.c_n, self.g_n)

    def handshakes(self, out_room: int) -> tuple:
        """(room: accumulators it takes of those offered, out_avail: words it offers, out_taken: words the sink
        takes, ``out_room`` being what the sink has room for, transfer, g_take, c_ready, b_ready, a_ready) for this
        cycle."""
        out_avail = min(self.o_left, self.parts)
        out_taken = min(out_avail, out_room)
        o_free = self.o_left == out_taken
        transfer = self.g_full and o_free
        g_take = self.c and (not self.g_full or transfer)
        c_ready = not self.c or g_take
        b_ready = not self.b or c_ready
        a_ready = not self.a or b_ready
        room = 0
        if self.busy and self.left != 0 and a_ready:
            if self.enable:
                room = min(self.parts, self.left, self.lanes - self.lane, self.row - self.pos)
            else:  # passing through: a chunk of what is left, one value when its fields are 64 bits
                room = 1 if self.wide else min(self.parts, self.left)
        return room, out_avail, out_taken, transfer, g_take, c_ready, b_ready, a_ready

    def start(self, config, count: int, wide: bool = False) -> None:
        """Latch ``config`` for ``count`` values; ``wide``: a chain's drain (accel_seq's ``raw64``), whose sums
        pass through as 64-bit fields, two words each."""
        self.enable = bool(config.enable)
        self.lanes = config.lanes if self.enable else 1
        self.words = config.group_words if self.enable else (2 if wide else 1)
        self.wide = wide and not self.enable
        self.row = config.row_values
        self.busy, self.left, self.lane, self.pos = count != 0, count, 0, 0
        self.a = self.b = self.c = self.g_full = False
        self.o_left = 0

    def edge(self, taken: int, shakes: tuple) -> None:
        """The edge after a cycle that took ``taken`` accumulators (0: none)."""
        _, _, out_taken, transfer, g_take, c_ready, b_ready, a_ready = shakes
        a, a_end, b, b_end, c_end = self.a, self.a_end, self.b, self.b_end, self.c_end
        a_n, b_n, c_n = self.a_n, self.b_n, self.c_n
        idle = (out_taken and self.o_left == out_taken and not transfer and not self.g_full and not self.c and not b
                and not a and self.left == 0)
        take = taken != 0
        if take:
            row_last = self.row - self.pos == taken
            self.a_end = not self.enable or self.left == taken or self.lanes - self.lane == taken or row_last
            self.left -= taken
            self.lane = 0 if self.a_end else self.lane + taken
            self.pos = 0 if row_last else self.pos + taken
        if a_ready:
            self.a = take
            if take:
                self.a_n = taken
        if b_ready:
            self.b = a
            if a:
                self.b_end, self.b_n = a_end, a_n
        if c_ready:
            self.c = b
            if b:
                self.c_end, self.c_n = b_end, b_n
        if g_take:
            self.g_full, self.g_n = c_end, c_n
        elif transfer:
            self.g_full = False
        if transfer:  # passing through 32-bit words, a group is its chunk's words
            self.o_left = self.words if self.enable or self.wide else self.g_n
        else:
            self.o_left -= out_taken
        if idle:
            self.busy = False
