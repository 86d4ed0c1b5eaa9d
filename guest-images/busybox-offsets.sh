# Sourced by guest-images/record-uprobes.sh: probe points in the initramfs's static busybox, which
# Debian ships stripped, found with the host's binutils (readelf, od) and recorded with the
# reference they serve. Changes nothing.
#
# Provides: busybox_offsets FILE, which sets
#   $bb_entry      the file offset of the ELF entry (_start: runs once per exec of busybox)
#   $bb_true_main  the file offset of true_main, the 'true' applet (returns 0 at once)
# busybox keeps its applets' main functions in a table of pointers (applet_main[]) in the order of
# its sorted name list (applet_names[], NUL-separated, "[", "[[", "acpid", ...): the table is the
# one run of exactly that many .text addresses in .data.rel.ro, and true_main is its entry at the
# index of "true" in the names.

# The file offset of virtual address VADDR (decimal) in FILE, through its PT_LOAD headers.
elf_file_offset() {
  local f=$1 va=$2 type off vaddr paddr fsz rest
  while read -r type off vaddr paddr fsz rest; do
    [ "$type" = LOAD ] || continue
    if [ "$va" -ge $((off = 16#${off#0x}, vaddr = 16#${vaddr#0x}, vaddr)) ] && [ "$va" -lt $((vaddr + 16#${fsz#0x})) ]; then
      echo $((va - vaddr + off)); return 0
    fi
  done < <(readelf -lW "$f")
  echo "busybox-offsets: address $va is in no PT_LOAD segment of $f" >&2; return 1
}

# hex → decimal (bash arithmetic: 64-bit)
hex_dec() { echo $((16#${1#0x})); }

busybox_offsets() {
  local f=$1 names at list n idx tva tsz dva doff dsz table entry
  entry=$(readelf -hW "$f" | sed -nE 's/^ *Entry point address: *(0x[0-9a-f]+)$/\1/p')
  [ -n "$entry" ] || { echo "busybox-offsets: no entry point in $f" >&2; return 1; }
  bb_entry=$(elf_file_offset "$f" "$(hex_dec "$entry")") || return 1
  at=$(LC_ALL=C grep -aobP '\[\x00\[\[\x00' "$f" | head -n1 | cut -d: -f1)
  [ -n "$at" ] || { echo "busybox-offsets: no applet name list in $f" >&2; return 1; }
  list=$(dd if="$f" bs=4096 skip="$at" count=2 iflag=skip_bytes 2>/dev/null | LC_ALL=C awk 'BEGIN { RS = "\0" } $0 == "" { exit } { print }')
  n=$(printf '%s\n' "$list" | wc -l)
  idx=$(printf '%s\n' "$list" | grep -nx true | cut -d: -f1)
  [ -n "$idx" ] || { echo "busybox-offsets: no 'true' applet in $f" >&2; return 1; }
  read -r tva tsz < <(readelf -SW "$f" | sed 's/\[ *[0-9]*\]//' | awk '$1 == ".text" { print $3, $5 }')
  read -r dva doff dsz < <(readelf -SW "$f" | sed 's/\[ *[0-9]*\]//' | awk '$1 == ".data.rel.ro" { print $3, $4, $5 }')
  [ -n "$tva" ] && [ -n "$dva" ] || { echo "busybox-offsets: no .text or .data.rel.ro in $f" >&2; return 1; }
  # the runs of consecutive words that are .text addresses; the table is the one run of n
  table=$(od -An -v -tu8 -w8 -j "$(hex_dec "$doff")" -N "$(hex_dec "$dsz")" "$f" | awk -v lo="$(hex_dec "$tva")" \
      -v hi="$(( $(hex_dec "$tva") + $(hex_dec "$tsz") ))" -v n="$n" '
      { v = $1 + 0; if (v >= lo && v < hi) { if (run == 0) start = NR; run++ } else { if (run == n) print start - 1; run = 0 } }
      END { if (run == n) print start - 1 }')
  [ "$(printf '%s\n' "$table" | grep -c .)" = 1 ] || { echo "busybox-offsets: no single applet_main table of $n entries in $f" >&2; return 1; }
  bb_true_main=$(od -An -tu8 -j "$(( $(hex_dec "$doff") + (table + idx - 1) * 8 ))" -N8 "$f" | tr -d ' ')
  bb_true_main=$(elf_file_offset "$f" "$bb_true_main") || return 1
}
