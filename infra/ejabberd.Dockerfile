# ejabberd for the Docker Compose stack (compose.yaml). Build context: the repository root.
#
# Debian 12's own ejabberd package (23.01, Erlang/OTP 25), the same build the native runner uses,
# rather than upstream's Alpine image: one server version, one set of behaviours to test against.
# erlc compiles our modules (ejabberd/*.erl); Node.js (Debian 12's 18.x) runs the start script's small
# steps and the health check.
FROM debian:bookworm-slim

# Package scripts must not try to start the distro's ejabberd service during the build (Debian's
# docker images usually ship this policy already; writing it keeps the build independent of that).
# The ejabberd user is created first with a fixed uid/gid (the package's postinst keeps an existing
# user): the spool volume's files stay readable across rebuilds, whatever ids Debian would assign.
RUN printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d \
    && chmod 0755 /usr/sbin/policy-rc.d \
    && groupadd --system --gid 9000 ejabberd \
    && useradd --system --uid 9000 --gid ejabberd --home-dir /var/lib/ejabberd --no-create-home \
        --shell /bin/sh ejabberd \
    && apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        ejabberd \
        nodejs \
        tini \
    && rm -rf /var/lib/apt/lists/* \
    # ejabberd's code lives in the multiarch libdir (/usr/lib/x86_64-linux-gnu, /usr/lib/aarch64-linux-gnu,
    # ...). Debian's ejabberdctl hard-codes that dir as ERL_LIBS; a fixed symlink lets the CMD below
    # start `erl` with the same ERL_LIBS on any architecture.
    && erl_libs="$(sed -n "s/^ERL_LIBS='\(.*\)'$/\1/p" /usr/sbin/ejabberdctl)" \
    && test -d "$erl_libs/ejabberd-23.01" \
    && ln -s "$erl_libs" /usr/lib/ejabberd-erl-libs \
    # Erlang creates a random distribution cookie in $HOME at first start (HOME is the spool volume
    # below, so it persists). Never ship one baked into the image.
    && rm -f /var/lib/ejabberd/.erlang.cookie /var/lib/ejabberd/.postinst.flag \
    && install -d -o ejabberd -g ejabberd -m 0700 /var/lib/ejabberd \
    && install -d -o ejabberd -g ejabberd -m 0750 /var/log/ejabberd

COPY infra/compose/ejabberd.yml /etc/ejabberd/ejabberd.yml
RUN chown root:ejabberd /etc/ejabberd/ejabberd.yml && chmod 0640 /etc/ejabberd/ejabberd.yml

# Our modules, compiled against this image's own ejabberd and xmpp headers. The dir is not named
# ejabberd*: OTP would take a code path dir of that name for ejabberd's lib dir.
COPY ejabberd/mod_svc_scope.erl ejabberd/svc_conversations.erl ejabberd/svc_circles.erl \
     ejabberd/ejabberd_auth_svc_api.erl ejabberd/ejabberd_auth_svc_control_plane.erl \
     ejabberd/svc_control_plane.erl /tmp/svc-modules/
RUN install -d /usr/local/lib/mod_svc_scope/ebin \
    && erlc -pa /usr/lib/ejabberd-erl-libs/ejabberd-23.01/ebin \
        -I /usr/lib/ejabberd-erl-libs/ejabberd-23.01/include \
        -I "$(echo /usr/lib/erlang/lib/p1_xmpp-*/include)" \
        -o /usr/local/lib/mod_svc_scope/ebin /tmp/svc-modules/*.erl \
    && rm -r /tmp/svc-modules

# The container's start: mod_svc_scope takes the control plane's address and secret from a file (as on
# the native path), so this writes one from the environment that compose.yaml passes
# (CONTROL_PLANE_URL, CONTROL_PLANE_SECRET), readable by ejabberd only, turns the API accounts' secrets into the digests ejabberd_auth_svc_api reads
# (SVC_EJABBERD_API_ACCOUNTS), writes the component listener's password (EJABBERD_COMPONENT_SECRET)
# as the macro that ejabberd.yml includes from /run/svc-ejabberd (ejabberd.yml cannot read the
# environment; JSON is YAML), then starts the CMD without any secret in its environment.
RUN install -d -o ejabberd -g ejabberd -m 0700 /run/svc-ejabberd \
    && printf '%s\n' \
        '#!/bin/sh' \
        'set -eu' \
        ': "${CONTROL_PLANE_URL:?set CONTROL_PLANE_URL}" "${CONTROL_PLANE_SECRET:?set CONTROL_PLANE_SECRET}"' \
        ': "${EJABBERD_API_SECRET:?set EJABBERD_API_SECRET}" "${EJABBERD_OPERATOR_SECRET:?set EJABBERD_OPERATOR_SECRET}"' \
        ': "${EJABBERD_COMPONENT_SECRET:?set EJABBERD_COMPONENT_SECRET}"' \
        'umask 077' \
        'node -e "fs.writeFileSync(process.argv[1], JSON.stringify({ url: process.env.CONTROL_PLANE_URL, secret: process.env.CONTROL_PLANE_SECRET }))" /run/svc-ejabberd/control-plane.json' \
        'node -e "fs.writeFileSync(process.argv[1], JSON.stringify({ define_macro: { SVC_COMPONENT_SECRET: process.env.EJABBERD_COMPONENT_SECRET } }))" /run/svc-ejabberd/component-secret.yml' \
        'SVC_EJABBERD_API_ACCOUNTS="$(node -e "const d = (s) => require(\"crypto\").createHash(\"sha256\").update(s).digest(\"hex\"); process.stdout.write(\"svc-api=\" + d(process.env.EJABBERD_API_SECRET) + \",svc-operator=\" + d(process.env.EJABBERD_OPERATOR_SECRET))")"' \
        'export SVC_EJABBERD_API_ACCOUNTS' \
        'exec env -u CONTROL_PLANE_SECRET -u EJABBERD_API_SECRET -u EJABBERD_OPERATOR_SECRET -u EJABBERD_COMPONENT_SECRET "$@"' \
        > /usr/local/bin/svc-ejabberd-start \
    && chmod 0755 /usr/local/bin/svc-ejabberd-start

# The same environment Debian's ejabberdctl builds before it starts the VM. Paths are Debian's
# defaults, so `docker compose exec ejabberd ejabberdctl <command>` finds this node unchanged.
ENV EJABBERD_CONFIG_PATH=/etc/ejabberd/ejabberd.yml \
    EJABBERD_LOG_PATH=/var/log/ejabberd/ejabberd.log \
    ERL_LIBS=/usr/lib/ejabberd-erl-libs \
    ERL_INETRC=/etc/ejabberd/inetrc \
    ERL_CRASH_DUMP=/var/log/ejabberd/erl_crash.dump \
    ERL_CRASH_DUMP_BYTES=0 \
    ERL_MAX_PORTS=32000 \
    ERL_MAX_ETS_TABLES=1400 \
    # Erlang distribution (epmd and the node's own port) listens on loopback only: anyone who can reach
    # it with the cookie can run code in the VM, so it must never be reachable from the network.
    ERL_EPMD_ADDRESS=127.0.0.1 \
    HOME=/var/lib/ejabberd

# Mnesia: accounts, rooms, message archives. The node name below is part of Mnesia's schema, so it
# is fixed (ejabberd@localhost) rather than derived from the container's changing hostname.
VOLUME ["/var/lib/ejabberd"]
WORKDIR /var/lib/ejabberd
USER ejabberd

# 5280: XMPP over WebSocket (/ws), for clients. 5281: the admin API (/api), internal only.
# 5275: the control plane's external component (XEP-0114), internal only.
EXPOSE 5275 5280 5281

# `erl` is started directly, not through `ejabberdctl foreground`: that script keeps a shell as the
# parent of the VM, which would swallow `docker stop`'s SIGTERM. Here the start script execs erl, and
# erl execs into beam.smp, which answers SIGTERM with a clean init:stop (exit 0 in about a second).
# tini is PID 1: it forwards signals and reaps the helper processes the VM spawns (epmd, inet_gethost).
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/svc-ejabberd-start"]
CMD ["/usr/bin/erl", \
     "-sname", "ejabberd@localhost", \
     "-noinput", \
     "-pa", "/usr/local/lib/mod_svc_scope/ebin", \
     "+K", "true", \
     "+P", "250000", \
     "-kernel", "inet_dist_use_interface", "{127,0,0,1}", \
     "-mnesia", "dir", "\"/var/lib/ejabberd\"", \
     "-ejabberd", "log_rotate_count", "1", "log_rotate_size", "10485760", \
     "-s", "ejabberd"]

# The API's health check permission (ejabberd.yml: "health check") allows `status` from loopback;
# the component listener (5275) must accept connections too, since the control plane connects to it.
# Debian 12's Node 18 still flags fetch as experimental, hence --no-warnings.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=5 \
    CMD ["node", "--no-warnings", "-e", "fetch('http://127.0.0.1:5281/api/status',{method:'POST',headers:{'content-type':'application/json'},body:'{}'}).then(r=>r.ok&&new Promise(k=>require('net').connect(5275,'127.0.0.1',()=>k(true)).on('error',()=>k(false)))).then(ok=>process.exit(ok?0:1),()=>process.exit(1))"]
