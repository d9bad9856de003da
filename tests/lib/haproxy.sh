# haproxy.sh -- sourced by the tests that run khub behind deploy/haproxy-khub.cfg
# as shipped (t0183, t0225, t0230): the one way they turn it into a file for
# loopback, so every test checks the same config the package installs.

# haproxy_shipped_config LB_PORT OUT PORT...: deploy/haproxy-khub.cfg with its
# syslog lines dropped, bound to 127.0.0.1:LB_PORT, its node1..node3 on the
# loopback PORTs given (nodes past the last PORT dropped), written to OUT.
haproxy_shipped_config() {
	local lb=$1 out=$2 i
	shift 2
	local args=(-e '/log \/dev\/log/d' -e '/^\tlog global/d' -e '/option httplog/d'
		-e "s|bind :80|bind 127.0.0.1:$lb|")
	for i in 1 2 3; do
		if [ "$i" -le $# ]; then
			args+=(-e "s|10.0.0.1$i:8080|127.0.0.1:${!i}|")
		else
			args+=(-e "/server node$i /d")
		fi
	done
	sed "${args[@]}" "$KHUB_SRC/deploy/haproxy-khub.cfg" >"$out"
}
