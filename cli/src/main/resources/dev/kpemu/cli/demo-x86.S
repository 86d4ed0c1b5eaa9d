# kpemu demo guest (x86-64, bare metal, loaded at 0x100000 with paging on).
# Installs its own #PF and int3 handlers, touches 1000 unmapped pages (its #PF handler maps
# each one), sums 1..100, hits an int3 that the host does not own, and halts.
# Results at 0x200000: [0] sum, [8] page faults handled, [16] int3s handled, [24] last #PF error code.
.set IDT_BASE, 0x6000
.macro gate vec, handler
  lea \handler(%rip), %rax
  mov %ax, IDT_BASE+\vec*16
  movw $0x10, IDT_BASE+\vec*16+2
  movw $0x8e00, IDT_BASE+\vec*16+4
  shr $16, %rax
  mov %ax, IDT_BASE+\vec*16+6
  shr $16, %rax
  mov %eax, IDT_BASE+\vec*16+8
  movl $0, IDT_BASE+\vec*16+12
.endm
_start:
  gate 14, pf_handler
  gate 3, bp_handler
  lidt idtr(%rip)
  mov $0x800000, %rdi
  mov $1000, %ecx
  xor %edx, %edx
1: mov %rdx, (%rdi)
  add $0x1000, %rdi
  inc %rdx
  loop 1b
  xor %eax, %eax
  mov $100, %ecx
2: add %rcx, %rax
  loop 2b
  mov %rax, 0x200000
  int3
  hlt
pf_handler:
  push %rax
  push %rbx
  mov 16(%rsp), %rbx
  mov %rbx, 0x200018
  mov %cr2, %rax
  and $~0xfff, %rax
  mov %rax, %rbx
  shr $12, %rbx
  sub $0x800, %rbx
  or $3, %rax
  mov %rax, 0x10000(,%rbx,8)
  mov %cr2, %rax
  invlpg (%rax)
  incq 0x200008
  pop %rbx
  pop %rax
  add $8, %rsp
  iretq
bp_handler:
  incq 0x200010
  iretq
idtr: .word 0xfff
  .quad 0x6000
