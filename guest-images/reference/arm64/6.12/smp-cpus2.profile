# kprobe_profile recorded by guest-images/record-smp.sh from Linux's own tracefs.
# kernel: 6.12.117+deb13-arm64 (package=linux-image-6.12.117+deb13-arm64 version=6.12.117-1 )
# suite: trixie
# qemu: QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)
# qemu -smp 2 (single-threaded TCG); guest: reference/smp.init, smp_rounds=50
# definitions (arm64/6.12/smp.events):
#   p:vers version_proc_show
#   p:versin version_proc_show+36
#   r:versr version_proc_show ret=$retval
  vers                                                     100               0
  versin                                                   100               0
  versr                                                    100               0
