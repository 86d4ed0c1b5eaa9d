#!/usr/bin/env python3
"""Side-by-side boot time to the init marker: QEMU TCG (PVH entry of the extracted vmlinux)
against kpemu (Debian's bzImage as shipped). Usage: measure-x86-boot.py [runs]
Env: KPEMU_CACHE (default <repo>/.cache), KPEMU_CP (classpath of the emulator module),
JAVA (default temurin 25)."""
import os, subprocess, sys, time
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.environ.get("KPEMU_CACHE", ROOT + "/.cache")
JAVA = os.environ.get("JAVA", "/usr/lib/jvm/temurin-25-jdk-amd64/bin/java")
CP = os.environ.get("KPEMU_CP", ROOT + "/emulator/target/classes")
def run(name, cmd, marker="KPEMU-INIT-DONE"):
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    tm = None; lines = []
    for line in p.stdout:
        l = line.decode('latin-1')
        lines.append(l)
        if tm is None and marker in l: tm = time.monotonic() - t0
    p.wait(); te = time.monotonic() - t0
    print(f"{name}: marker at {tm:.2f} s, exit {p.returncode} at {te:.2f} s")
    return tm, lines
K=CACHE + "/guest/x86_64"
kp = [JAVA,"--enable-native-access=ALL-UNNAMED","-Dkpemu.natives=" + CACHE + "/natives/lib","-Dkpemu.cache=" + CACHE,"-Dkpemu.root=" + ROOT,"-cp",CP,"dev.kpemu.boot.BootRunner","--kernel",K+"/vmlinuz","--initrd",K+"/initramfs.cpio","--memory","256"]
qemu = ["qemu-system-x86_64","-M","pc","-m","256","-kernel",K+"/vmlinux","-initrd",K+"/initramfs.cpio","-append","console=ttyS0 nokaslr","-display","none","-serial","stdio","-monitor","none","-no-reboot"]
for i in range(int(sys.argv[1]) if len(sys.argv)>1 else 2):
    q,_ = run("qemu-tcg-pvh", qemu)
    k,kl = run("kpemu", kp)
    print(f"ratio {k/q:.2f}")
    print("".join(l for l in kl if l.startswith("kpemu:")))
