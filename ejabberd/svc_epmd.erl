%%% svc_epmd: Erlang distribution without an epmd daemon, for several nodes on one host.
%%%
%%% The stack runner starts each ejabberd node with `-start_epmd false -epmd_module svc_epmd` and the
%%% same SVC_DIST_PORTS on every node of a profile, e.g.
%%%   SVC_DIST_PORTS="svc-scale-a:29030,svc-scale-b:29050,svc-scale-ctl:29010"
%%% A node listens on its own entry's port and reaches the others at theirs. `-erl_epmd_port` would do
%%% for one node, but it makes every node listen on and dial the same port, so two nodes on one host
%%% could never connect; a real epmd would be one more daemon to supervise and to outlive the nodes.
%%%
%%% Built next to mod_svc_scope (infra/src/servers/ejabberd.ts).
-module(svc_epmd).

-export([start_link/0, register_node/2, register_node/3, port_please/2, port_please/3,
         listen_port_please/2, names/1, address_please/3]).

-define(PORTS_VARIABLE, "SVC_DIST_PORTS").
%% The distribution protocol version that OTP 23 and later speak.
-define(PROTOCOL_VERSION, 6).

%% No daemon to start, and nothing to register with: the table is the environment.
start_link() -> ignore.

register_node(_Name, _Port) -> {ok, -1}.
register_node(_Name, _Port, _Family) -> {ok, -1}.

listen_port_please(Name, _Host) -> {ok, port_of(Name)}.

port_please(Name, Host) -> port_please(Name, Host, infinity).
port_please(Name, _Host, _Timeout) ->
    case port_of(Name) of
        0 -> noport;
        Port -> {port, Port, ?PROTOCOL_VERSION}
    end.

names(_Host) -> {error, address}.

address_please(_Name, Host, AddressFamily) -> inet:getaddr(Host, AddressFamily).

%% The port of a node name (the part before the @), or 0 when SVC_DIST_PORTS does not list it.
port_of(Name) when is_atom(Name) -> port_of(atom_to_list(Name));
port_of(Name) ->
    Entries = [string:split(Entry, ":") || Entry <- string:lexemes(os:getenv(?PORTS_VARIABLE, ""), ",")],
    case [list_to_integer(Port) || [Node, Port] <- Entries, Node =:= Name] of
        [Port | _] -> Port;
        [] -> 0
    end.
