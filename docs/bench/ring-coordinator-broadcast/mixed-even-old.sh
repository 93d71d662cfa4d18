#!/bin/sh
# electord of a mixed-version cluster: even ids run the old binary, odd ids the new one.
case "$2" in
2|4|6|8) exec /tmp/ringcast/electord-old "$@" ;;
*) exec /tmp/ringcast/electord-new "$@" ;;
esac
