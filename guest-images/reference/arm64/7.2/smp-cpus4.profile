# kprobe_profile recorded by guest-images/record-smp.sh from Linux's own tracefs.
# kernel: 7.2.13+deb14-arm64 (package=linux-image-7.2.13+deb14-arm64 version=7.2.13-1 )
# suite: sid
# qemu: QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)
# qemu -smp 4 (single-threaded TCG); guest: reference/smp.init, smp_rounds=50
# definitions (arm64/7.2/smp.events):
#   p:vers version_proc_show
#   p:versin version_proc_show+52
#   r:versr version_proc_show ret=$retval
  vers                                                     200               0
  versin                                                   200               0
  versr                                                    200               0
