# kprobe_profile recorded by guest-images/record-smp.sh from Linux's own tracefs.
# kernel: 7.2.13+deb14-amd64 (package=linux-image-7.2.13+deb14-amd64 version=7.2.13-1 )
# suite: sid
# qemu: QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)
# qemu -smp 2 (single-threaded TCG); guest: reference/smp.init, smp_rounds=50
# definitions (x86_64/7.2/smp.events):
#   p:vers version_proc_show
#   p:versin version_proc_show+49
#   r:versr version_proc_show ret=$retval
  vers                                                     100               0
  versin                                                   100               0
  versr                                                    100               0
