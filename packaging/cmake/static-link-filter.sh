#!/bin/sh
# static-link-filter.sh LINK-COMMAND... - runs the link of a fully static executable and drops exactly one
# known, accepted linker note, keeping every other line and the link's exit status.
#
# glibc marks getaddrinfo, gethostbyname, dlopen, getpwnam... with a link-time note: "Using 'X' in statically
# linked applications requires at runtime the shared libraries from the glibc version used for linking". The
# static nymph accepts that on purpose: files and dns lookups work built in, other NSS modules come from the
# host (docs/install.md, on /etc/nsswitch.conf). The note and the "in function" line before it are removed; any
# other warning or error is printed as the linker wrote it.
out=$("$@" 2>&1)
status=$?
[ -n "$out" ] && printf '%s\n' "$out" | awk '
  /: in function `/ { held = $0; next }
  /in statically linked applications requires at runtime the shared libraries from the glibc version used for linking/ { held = ""; next }
  { if (held != "") { print held; held = "" } print }
  END { if (held != "") print held }' >&2
exit $status
