package dev.kpemu.kprobes.events;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.junit.jupiter.api.Test;

class ProbeGlobTest {
    static final List<ProbeGlob.Symbol> SYMS = List.of(
            new ProbeGlob.Symbol("tcp_sendmsg", true), new ProbeGlob.Symbol("tcp_recvmsg", true),
            new ProbeGlob.Symbol("tcp_sendmsg.cold", true), new ProbeGlob.Symbol("tcp_hashinfo", false),
            new ProbeGlob.Symbol("tcp_dup", true), new ProbeGlob.Symbol("tcp_dup", true),
            new ProbeGlob.Symbol("udp_sendmsg", true), new ProbeGlob.Symbol("tcp_v4_rcv", true));

    @Test
    void onlyGlobsAreGlobs() {
        assertTrue(ProbeGlob.isGlob("p:tcp/ tcp_*"));
        assertTrue(ProbeGlob.isGlob("r:x/ tcp_?endmsg ret=$retval"));
        assertTrue(ProbeGlob.isGlob("p tcp_[sr]*+4 a=%di"));
        assertFalse(ProbeGlob.isGlob("p:myopen do_sys_openat2 dfd=%di"));
        assertFalse(ProbeGlob.isGlob("p:a do_sys_openat2 x=+0(%si):string"), "a fetch argument is no glob");
        assertFalse(ProbeGlob.isGlob("-:myopen"));
    }

    @Test
    void functionsNamedAsLinuxNamesProbesWithoutAName() {
        ProbeGlob.Expansion x = ProbeGlob.expand("p:tcp/ tcp_* a=%di", SYMS);
        // not data, not compiler clones (.cold), not names that appear twice
        assertEquals(List.of("tcp_sendmsg", "tcp_recvmsg", "tcp_v4_rcv"), x.matched());
        assertEquals(List.of("p:tcp/p_tcp_sendmsg_0 tcp_sendmsg a=%di", "p:tcp/p_tcp_recvmsg_0 tcp_recvmsg a=%di",
                "p:tcp/p_tcp_v4_rcv_0 tcp_v4_rcv a=%di"), x.definitions());
    }

    @Test
    void returnProbesOffsetsMaxactiveAndTheDefaultGroup() {
        assertEquals(List.of("r8:kprobes/r_tcp_sendmsg_0 tcp_sendmsg ret=$retval"),
                ProbeGlob.expand("r8 tcp_s?ndmsg ret=$retval", SYMS).definitions());
        assertEquals(List.of("p:g/r_udp_sendmsg_0 udp_sendmsg%return"), ProbeGlob.expand("p:g/ udp_*%return", SYMS).definitions());
        assertEquals(List.of("p:g/p_tcp_recvmsg_4 tcp_recvmsg+4", "p:g/p_tcp_sendmsg_4 tcp_sendmsg+4"),
                ProbeGlob.expand("p:g/ tcp_[r-s][!x]*+4", SYMS).definitions().stream().sorted().toList());
    }

    @Test
    void aGlobNamesNoEvent() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> ProbeGlob.expand("p:tcp/send tcp_*", SYMS));
        assertTrue(e.getMessage().contains("write 'p:tcp/ tcp_*'"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> ProbeGlob.expand("p:g/ tcp_[ab", SYMS));
    }
}
