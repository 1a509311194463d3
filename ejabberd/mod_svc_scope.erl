%%% mod_svc_scope: keeps the bundle's apps apart inside one ejabberd 23.01, holds org identities to
%%% their org's policy (docs/orgs.md), archives an app's messages only when the app asks for it, makes
%%% a revoked credential's racing login fail, and hands the control plane's messaging component its
%%% deliveries' outcomes (docs/messaging.md).
%%%
%%% Every app has a chat prefix: its users are <prefix>.<user>@<host>, its rooms
%%% <prefix>.<room>@<muc host>. The prefix is the local part up to the first dot; a local part
%%% without a dot (system@, an operator's account) belongs to no app. An org's identities and rooms
%%% are <prefix>.+<org key>.<node>: the org key is 12 lowercase letters and digits.
%%%
%%% Built by the stack runner (infra/src/servers/ejabberd.ts) and infra/ejabberd.Dockerfile:
%%%   erlc -I <ejabberd>/include -I <p1_xmpp>/include mod_svc_scope.erl
-module(mod_svc_scope).
-behaviour(gen_mod).

-export([start/2, stop/1, depends/2, mod_options/1, mod_opt_type/1, mod_doc/0]).
-export([user_send_packet/1, filter_packet/1, store_mam_message/7, c2s_auth_result/3,
         c2s_session_opened/1, c2s_session_resumed/1, c2s_self_presence/1, user_receive_packet/1,
         offline_message/1, process_delivery/1, decode_iq_subel/1]).
-export([set_archiving/2, get_archiving/1, revoke_user/2, mark_revoked/2, password_checked/1,
         revoke_prefix/2, flush_org/1, archive_size/2]).

-include("logger.hrl").
-include("xmpp.hrl").
-include("ejabberd_commands.hrl").

%% One row per app that has been told about archiving; enabled is 1 or 0.
-record(svc_archiving, {prefix :: binary(), enabled :: 0 | 1}).

%% When a user's credential was last revoked on this node (monotonic milliseconds: comparable only
%% with this node's own clock, so every node keeps its own rows).
%% `us` is {LUser, LServer}, or {{prefix, Prefix}, LServer} for every identity of an org.
-record(svc_revocation, {us :: {binary() | {prefix, binary()}, binary()}, at :: integer()}).

-define(FORBIDDEN_TEXT, <<"Addresses of another app are out of reach">>).
%% The messaging component's deliveries, their outcomes and the notices of their arrival.
-define(NS_MESSAGING, <<"urn:svc:messaging:0">>).
-define(ORG_POLICY_TEXT, <<"The organisation's policy does not allow this conversation">>).
%% Answers of the control plane about who may reach whom in an org: {OrgKey, FromUser, ToUser}.
-define(REACH_CACHE, svc_reach).
-define(REACH_TTL_MS, 60000).
-define(HTTP_PROFILE, svc_scope).
%% The process dictionary key under which a login keeps when its password was checked.
-define(PASSWORD_CHECKED, svc_password_checked).
%% A session must be opened this soon after its password check; revocations are kept twice as long.
-define(LOGIN_WINDOW_MS, 60000).
-define(REVOCATION_KEPT_MS, 120000).

%%--------------------------------------------------------------------
%% gen_mod
%%--------------------------------------------------------------------

start(Host, _Opts) ->
    %% disc_copies: the flags survive restarts, and every lookup is a RAM read. Without the table
    %% the module does not start: archiving decisions must never be left to chance.
    Tables = [ejabberd_mnesia:create(?MODULE, svc_archiving,
                                     [{disc_copies, [node()]},
                                      {attributes, record_info(fields, svc_archiving)}]),
              ejabberd_mnesia:create(?MODULE, svc_revocation,
                                     [{ram_copies, [node()]}, {local_content, true},
                                      {attributes, record_info(fields, svc_revocation)}])],
    case lists:usort(Tables) of
        [{atomic, ok}] ->
            start_reach(Host),
            %% Before mod_mam (88), so that a dropped stanza is never archived as sent.
            ejabberd_hooks:add(user_send_packet, Host, ?MODULE, user_send_packet, 10),
            %% Before mod_mam's own store_mam_message (100), which writes the archive.
            ejabberd_hooks:add(store_mam_message, Host, ?MODULE, store_mam_message, 50),
            ejabberd_hooks:add(c2s_auth_result, Host, ?MODULE, c2s_auth_result, 50),
            ejabberd_hooks:add(c2s_session_opened, Host, ?MODULE, c2s_session_opened, 50),
            ejabberd_hooks:add(c2s_session_resumed, Host, ?MODULE, c2s_session_resumed, 50),
            ejabberd_hooks:add(c2s_self_presence, Host, ?MODULE, c2s_self_presence, 50),
            %% Runs only for what passed the privacy lists, as the stanza is about to reach the client.
            ejabberd_hooks:add(user_receive_packet, Host, ?MODULE, user_receive_packet, 100),
            %% Before mod_offline's store_packet (50).
            ejabberd_hooks:add(offline_message_hook, Host, ?MODULE, offline_message, 40),
            gen_iq_handler:add_iq_handler(ejabberd_local, Host, ?NS_MESSAGING, ?MODULE, process_delivery),
            %% Node-wide (one router for every host); adding it again for a second host is a no-op.
            ejabberd_hooks:add(filter_packet, ?MODULE, filter_packet, 50),
            ejabberd_commands:register_commands(?MODULE, commands()),
            ok;
        Errors ->
            {error, {svc_tables, Errors}}
    end.

stop(Host) ->
    ejabberd_hooks:delete(user_send_packet, Host, ?MODULE, user_send_packet, 10),
    ejabberd_hooks:delete(store_mam_message, Host, ?MODULE, store_mam_message, 50),
    ejabberd_hooks:delete(c2s_auth_result, Host, ?MODULE, c2s_auth_result, 50),
    ejabberd_hooks:delete(c2s_session_opened, Host, ?MODULE, c2s_session_opened, 50),
    ejabberd_hooks:delete(c2s_session_resumed, Host, ?MODULE, c2s_session_resumed, 50),
    ejabberd_hooks:delete(c2s_self_presence, Host, ?MODULE, c2s_self_presence, 50),
    ejabberd_hooks:delete(user_receive_packet, Host, ?MODULE, user_receive_packet, 100),
    ejabberd_hooks:delete(offline_message_hook, Host, ?MODULE, offline_message, 40),
    gen_iq_handler:remove_iq_handler(ejabberd_local, Host, ?NS_MESSAGING),
    case gen_mod:is_loaded_elsewhere(Host, ?MODULE) of
        true -> ok;
        false ->
            inets:stop(httpc, ?HTTP_PROFILE),
            ejabberd_hooks:delete(filter_packet, ?MODULE, filter_packet, 50),
            ejabberd_commands:unregister_commands(commands())
    end.

depends(_Host, _Opts) -> [].

%% The control plane's external component (XEP-0114), the only sender whose deliveries are taken.
mod_opt_type(messaging_host) -> econf:either(none, econf:domain());
%% The JSON file {url, secret} of the control plane's internal listener (svc_control_plane): where
%% org policy questions and, for ejabberd_auth_svc_control_plane, logins go. Without it, org
%% identities reach nobody and no chat user can sign in.
mod_opt_type(control_plane) -> econf:either(none, econf:file()).

mod_options(_Host) -> [{messaging_host, none}, {control_plane, none}].

mod_doc() ->
    #{desc => [<<"Keeps app-scoped chat addresses apart, archives each app's messages only when "
                 "svc_set_archiving enabled it, closes a login that raced svc_revoke_user, and "
                 "delivers the messaging component's messages with their outcome.">>]}.

%%--------------------------------------------------------------------
%% API accounts
%%--------------------------------------------------------------------

%% The HTTP API's accounts (ejabberd_auth_svc_api) are credentials for the API, never chat users: a
%% client that signs in with one is disconnected before its session opens. (ejabberd 23.01's WebSocket
%% listener takes no `access` option, so the c2s access rule cannot say it.)
c2s_auth_result(#{auth_module := ejabberd_auth_svc_api, lang := Lang} = State, true, _User) ->
    {stop, ejabberd_c2s:send(State, xmpp:serr_not_authorized(<<"An API account cannot sign in to chat">>, Lang))};
c2s_auth_result(State, _Result, _User) ->
    State.

%%--------------------------------------------------------------------
%% Revocation
%%--------------------------------------------------------------------

%% The control plane revokes a credential by deleting it, then calling svc_revoke_user. A login whose
%% password the control plane accepted just before the deletion has no session yet for the kick to
%% close; it opens one afterwards. So every node notes when it revoked the user, each login notes when
%% its password was checked (ejabberd_auth_svc_api calls password_checked/1 in the login's process,
%% before ejabberd_auth_svc_control_plane asks the control plane), and a session whose password check is not
%% later than the user's revocation is closed as it opens: it raced the revocation. The kick that
%% follows the note closes every session opened before it.

%% Called in the login's own process, before the password goes to the control plane.
password_checked(LUser) ->
    put(?PASSWORD_CHECKED, {LUser, erlang:monotonic_time(millisecond)}).

c2s_session_opened(#{user := User, lserver := LServer, lang := Lang} = State) ->
    case raced_revocation(jid:nodeprep(User), LServer) of
        false ->
            State;
        true ->
            Text = <<"The credential was revoked while signing in">>,
            {stop, ejabberd_c2s:send(State, xmpp:serr_not_authorized(Text, Lang))}
    end.

%% A resumed stream (XEP-0198) authenticated with a password of its own first: judged alike.
c2s_session_resumed(State) ->
    c2s_session_opened(State).

%% A session's first available presence marks it in the session table (the session's own process
%% may): one that later goes unavailable is not taken for one still signing in (reach/2).
c2s_self_presence({#presence{type = available} = Pres,
                   #{user := U, server := S, resource := R} = State}) when not is_map_key(svc_announced, State) ->
    _ = ejabberd_sm:set_user_info(U, S, R, svc_announced, true),
    {Pres, State#{svc_announced => true}};
c2s_self_presence(Acc) ->
    Acc.

raced_revocation(LUser, LServer) ->
    case erase(?PASSWORD_CHECKED) of
        {LUser, Checked} ->
            %% A login held open longer than revocations are kept could not be judged: it is refused.
            erlang:monotonic_time(millisecond) - Checked > ?LOGIN_WINDOW_MS orelse
                revoked_since(LUser, LServer, Checked) orelse
                case org_prefix(LUser) of
                    none -> false;
                    Prefix -> revoked_since({prefix, Prefix}, LServer, Checked)
                end;
        %% Every password is checked through ejabberd_auth_svc_api first (auth_method); a session
        %% without a noted check was not authenticated by password (nothing of ours to judge).
        _ ->
            false
    end.

revoked_since(Who, LServer, Checked) ->
    case mnesia:dirty_read(svc_revocation, {Who, LServer}) of
        [#svc_revocation{at = Revoked}] -> Revoked >= Checked;
        [] -> false
    end.

%% The org part of an org identity's local part (<prefix>.+<key>.), or none.
org_prefix(LUser) ->
    case org_key(LUser) of
        none -> none;
        Key -> <<(scope(LUser))/binary, ".+", Key/binary, ".">>
    end.

%% Notes the revocation on every node of the cluster, then closes the user's open sessions.
revoke_user(User, Host) ->
    case {jid:nodeprep(User), jid:nameprep(Host)} of
        {LUser, LServer} when is_binary(LUser), LUser /= <<>>, is_binary(LServer) ->
            case ejabberd_router:is_my_host(LServer) of
                false ->
                    {error, <<"host is not served here">>};
                true ->
                    {Results, Unreached} =
                        ejabberd_cluster:multicall(?MODULE, mark_revoked, [LUser, LServer]),
                    Closed = ejabberd_sm:kick_user(LUser, LServer),
                    case Unreached == [] andalso lists:all(fun(R) -> R == ok end, Results) of
                        true ->
                            Closed;
                        false ->
                            ?ERROR_MSG("Revocation of ~ts@~ts not noted on every node: ~p ~p",
                                       [LUser, LServer, Results, Unreached]),
                            {error, <<"the revocation did not reach every node">>}
                    end
            end;
        _ ->
            {error, <<"user and host must be a valid account">>}
    end.

%% This node's note, and the end of notes too old for any login still allowed to open a session.
mark_revoked(LUser, LServer) ->
    Now = erlang:monotonic_time(millisecond),
    Expired = mnesia:dirty_select(svc_revocation,
                                  [{#svc_revocation{us = '$1', at = '$2'},
                                    [{'<', '$2', Now - ?REVOCATION_KEPT_MS}], ['$1']}]),
    lists:foreach(fun(US) -> mnesia:dirty_delete(svc_revocation, US) end, Expired),
    mnesia:dirty_write(#svc_revocation{us = {LUser, LServer}, at = Now}).

%%--------------------------------------------------------------------
%% Isolation
%%--------------------------------------------------------------------

%% A client's stanza to another app's user or room is dropped and answered with <forbidden/>.
%% Only client sessions are policed: mod_admin_extra's send_message and send_stanza run this hook
%% with a bare #{jid} state and route the stanza whatever it returns; that API is the control
%% plane's, and it is trusted (it posts the system account's messages into rooms).
user_send_packet({Pkt, #{mod := ejabberd_c2s} = State}) ->
    From = xmpp:get_from(Pkt),
    To = xmpp:get_to(Pkt),
    case crosses_apps(From, To) of
        true ->
            {stop, {drop, bounce(Pkt, State, ?FORBIDDEN_TEXT)}};
        false ->
            case org_reach(From, To, Pkt) of
                allow -> {stamp_reply(Pkt), State};
                deny -> {stop, {drop, bounce(Pkt, State, ?ORG_POLICY_TEXT)}}
            end
    end;
user_send_packet(Acc) ->
    Acc.

%% A user's message to a messaging identity says when this server took it (<sent at='microseconds
%% since the epoch'/>, of the messaging namespace), any the client put there dropped first. ejabberd
%% hands a user's replies to the control-plane replicas at random, so a STOP and the START after it
%% can be handled in either order: the control plane keeps the consent of the one sent last.
stamp_reply(#message{from = #jid{lserver = LServer}, to = #jid{lserver = To}} = Msg) ->
    case messaging_host(LServer) of
        To ->
            At = integer_to_binary(erlang:system_time(microsecond)),
            Stamp = #xmlel{name = <<"sent">>, attrs = [{<<"xmlns">>, ?NS_MESSAGING}, {<<"at">>, At}]},
            xmpp:set_els(Msg, [Stamp | [El || El <- xmpp:get_els(Msg), not is_stamp(El)]]);
        _ ->
            Msg
    end;
stamp_reply(Pkt) ->
    Pkt.

is_stamp(#xmlel{name = <<"sent">>, attrs = Attrs}) ->
    fxml:get_attr_s(<<"xmlns">>, Attrs) == ?NS_MESSAGING;
is_stamp(_) ->
    false.

%% Rooms speak only to their own app. This stops what a room sends on someone's behalf, such as
%% a room admin's mediated invitation (XEP-0045 7.8.2), from reaching another app's user.
%% Stanzas from users are left to user_send_packet, which also lets the control plane's API through.
filter_packet(drop) ->
    drop;  % an earlier filter dropped it
filter_packet(Pkt) ->
    From = xmpp:get_from(Pkt),
    %% The cheap test first: this runs for every stanza the node routes.
    case crosses_apps(From, xmpp:get_to(Pkt)) andalso is_service(From#jid.lserver) of
        true -> {stop, drop};
        false -> Pkt
    end.

%% True when both ends are accounts or rooms (they have a local part) on this server, and they
%% belong to different apps (or one to an app and the other to none). Anything else, such as
%% stanzas to a server or service itself, is not an app's business.
crosses_apps(#jid{luser = FromUser}, #jid{luser = ToUser, lserver = ToServer})
  when FromUser /= <<>>, ToUser /= <<>> ->
    scope(FromUser) /= scope(ToUser) andalso ejabberd_router:is_my_route(ToServer);
crosses_apps(_From, _To) ->
    false.

%% The stanza's sender learns why nothing happened; errors and IQ results are never answered.
bounce(Pkt, State, Text) ->
    case xmpp:get_type(Pkt) of
        Type when Type == error; Type == result ->
            State;
        _ ->
            Err = xmpp:err_forbidden(Text, xmpp:get_lang(Pkt)),
            ejabberd_c2s:send(State, xmpp:make_error(Pkt, Err))
    end.

%% A local service such as the MUC host: routed here, but not a virtual host of accounts.
is_service(Server) ->
    ejabberd_router:is_my_route(Server) andalso not ejabberd_router:is_my_host(Server).

-spec scope(binary()) -> binary() | none.
scope(LUser) ->
    case binary:split(LUser, <<".">>) of
        [Prefix, _] -> Prefix;
        [_] -> none
    end.

%%--------------------------------------------------------------------
%% Org policy
%%--------------------------------------------------------------------

%% An org identity talks only inside its org: to members the org's policy lets it reach (the control
%% plane decides; its answers are kept a minute, and dropped at once when the org changes through
%% svc_flush_org) and into its org's rooms (members-only: mod_muc decides who enters). Nobody else
%% reaches an org identity. Stanzas to a server or service itself, and to one's own account, pass.
%% A business's conversation rooms also take their customer, a personal identity (svc_conversations).
org_reach(#jid{luser = FromUser, lserver = FromServer}, #jid{luser = ToUser, lserver = ToServer} = To, Pkt)
  when FromUser /= <<>>, ToUser /= <<>> ->
    case {org_key(FromUser), org_key(ToUser)} of
        {none, none} -> allow;
        _ when {FromUser, FromServer} == {ToUser, ToServer} -> allow;  % one's own account
        {none, Key} ->
            case is_service(ToServer) andalso svc_conversations:is_conversation(ToUser) of
                true -> in_conversation(Key, FromUser, To, Pkt);  % the customer
                false -> deny
            end;
        {FromKey, ToKey} when FromKey /= ToKey -> deny;
        {Key, Key} ->
            case {ejabberd_router:is_my_host(ToServer), is_service(ToServer)} of
                {true, _} -> may_reach(Key, FromUser, ToUser);
                {_, true} ->
                    case svc_conversations:is_conversation(ToUser) orelse svc_circles:is_circle_room(ToUser) of
                        true -> in_conversation(Key, FromUser, To, Pkt);  % the staff, a circle's member
                        false -> allow  % its org's room: affiliations decide
                    end;
                _ -> deny  % another server: an org identity talks only inside its org
            end
    end;
org_reach(_From, _To, _Pkt) ->
    allow.

%% In a conversation room the affiliations decide who enters; the control plane decides who may post
%% (the customer while the business's chat is on; the staff who may reply) and under which nickname
%% anyone enters (the customer's own, a staff member's the business gives them): "<room>/<nick>"
%% asks that. A circle's room asks the same two questions (a board takes posts from its admins and
%% mods only; an archived room takes neither posts nor entries). Only rooms that exist are asked about (made-up names cost the control plane nothing;
%% mod_muc answers them). Subscriptions are the bundle's to make, never a client's.
in_conversation(Key, FromUser, #jid{luser = Room, lserver = Service, lresource = Nick}, Pkt) ->
    Exists = fun() -> mod_muc:find_online_room(Room, Service) /= error end,
    case Pkt of
        #message{type = groupchat} ->
            case Exists() of
                true -> may_reach(Key, FromUser, Room);
                false -> allow
            end;
        #presence{type = available} when Nick /= <<>> ->
            case Exists() of
                true -> may_reach(Key, FromUser, <<Room/binary, "/", Nick/binary>>);
                false -> allow
            end;
        #iq{} ->
            case xmpp:has_subtag(Pkt, #muc_subscribe{}) of
                true -> deny;
                false -> allow
            end;
        _ ->
            allow
    end.

%% The org key of an org identity's or room's node (<prefix>.+<key>.<node>), or none.
org_key(LUser) ->
    case binary:split(LUser, <<".">>) of
        [_Prefix, <<"+", Rest/binary>>] ->
            case binary:split(Rest, <<".">>) of
                [Key, Node] when byte_size(Key) == 12, Node /= <<>> -> Key;
                _ -> none
            end;
        _ ->
            none
    end.

may_reach(Key, FromUser, ToUser) ->
    try ets_cache:lookup(?REACH_CACHE, {Key, FromUser, ToUser},
                         fun() -> ask_control_plane(FromUser, ToUser) end) of
        {ok, true} -> allow;
        _ -> deny
    catch Class:Reason:St ->
        %% A hook that crashes lets the stanza through: a failure here must refuse it instead.
        ?ERROR_MSG("Org policy check failed: ~ts", [misc:format_exception(2, Class, Reason, St)]),
        deny
    end.

%% {ok, Allowed} is kept in the cache; a failure ({nocache, false}) refuses this stanza only.
ask_control_plane(FromUser, ToUser) ->
    case svc_control_plane:post(?HTTP_PROFILE, "/internal/ejabberd/reach",
                                #{from => FromUser, to => ToUser}, 3000) of
        {ok, #{<<"ok">> := Allowed}} when is_boolean(Allowed) ->
            {ok, Allowed};
        {error, not_configured} ->
            {nocache, false};
        Other ->
            ?WARNING_MSG("The control plane did not answer an org policy question: ~p", [Other]),
            {nocache, false}
    end.

start_reach(Host) ->
    ets_cache:new(?REACH_CACHE, [{max_size, 200000}, {life_time, ?REACH_TTL_MS}]),
    svc_control_plane:start_profile(?HTTP_PROFILE, 16),
    svc_control_plane:configure(gen_mod:get_module_opt(Host, ?MODULE, control_plane)).

%% The org changed (its policy, a member, a team): every node forgets its answers about it.
flush_org(Key) ->
    case re:run(Key, <<"^[a-z0-9]{12}\\z">>, [{capture, none}]) of
        match ->
            ets_cache:match_delete(?REACH_CACHE, {Key, '_', '_'}, ejabberd_cluster:get_nodes()),
            ok;
        nomatch ->
            {error, <<"key must be 12 lowercase letters or digits">>}
    end.

%% Revokes every identity whose local part starts with Prefix (an org's): notes it on every node,
%% so that a login racing it is closed as it opens, then closes their open sessions.
revoke_prefix(Prefix, Host) ->
    case {org_prefix(<<Prefix/binary, "x">>), jid:nameprep(Host)} of
        {Prefix, LServer} when is_binary(LServer) ->
            case ejabberd_router:is_my_host(LServer) of
                false ->
                    {error, <<"host is not served here">>};
                true ->
                    {Results, Unreached} =
                        ejabberd_cluster:multicall(?MODULE, mark_revoked, [{prefix, Prefix}, LServer]),
                    Users = lists:usort([U || {U, S, _} <- ejabberd_sm:get_vh_session_list(LServer),
                                              S == LServer, binary:longest_common_prefix([U, Prefix])
                                                  == byte_size(Prefix)]),
                    Closed = lists:sum([ejabberd_sm:kick_user(U, LServer) || U <- Users]),
                    case Unreached == [] andalso lists:all(fun(R) -> R == ok end, Results) of
                        true ->
                            Closed;
                        false ->
                            ?ERROR_MSG("Revocation of ~ts* not noted on every node: ~p ~p",
                                       [Prefix, Results, Unreached]),
                            {error, <<"the revocation did not reach every node">>}
                    end
            end;
        _ ->
            {error, <<"prefix must be an org's: <prefix>.+<key>.">>}
    end.

%%--------------------------------------------------------------------
%% Messaging (the control plane's component: OTPs, promos)
%%--------------------------------------------------------------------

%% The component asks this host, in one IQ, to deliver a message to one of its accounts, and learns
%% what became of it, decided here and nowhere else:
%%   <iq type='set' from='<messaging host>' to='<host>'>
%%     <deliver xmlns='urn:svc:messaging:0' [on-behalf-of='<jid>']><message from to .../></deliver>
%%   </iq>
%% answered with <delivery xmlns='urn:svc:messaging:0' status='S'/>, S one of:
%%   online (handed to a session), stored (kept offline until the next login), no-account (nobody by
%%   that name), blocked (the recipient's privacy lists, XEP-0191 block list included, refuse the
%%   sender, or the account it sends for: on-behalf-of), refused (the offline store would not take it).
process_delivery(#iq{type = set, from = #jid{lserver = Sender}, to = #jid{lserver = LServer},
                     sub_els = [#xmlel{name = <<"deliver">>} = Deliver]} = IQ) ->
    case messaging_host(LServer) of
        Sender ->
            %% An IQ handler runs in the process of the connection that sent the IQ: the component's.
            %% Each delivery waits on the account check (the auth method's round trip to the control
            %% plane), so there they would queue one behind another; the control plane sends to one
            %% recipient one delivery at a time (its per-recipient limit lock), so their order holds.
            %% The answer goes straight back to that connection: the router would hand it to any
            %% control plane connected for the messaging host.
            Connection = self(),
            spawn(fun() -> Connection ! {route, answer_delivery(IQ, LServer, Sender, Deliver)} end),
            ignore;
        _ ->
            xmpp:make_error(IQ, xmpp:err_forbidden(<<"Only the messaging component delivers">>,
                                                   xmpp:get_lang(IQ)))
    end;
process_delivery(IQ) ->
    xmpp:make_error(IQ, xmpp:err_bad_request(<<"Expected a deliver set">>, xmpp:get_lang(IQ))).

answer_delivery(IQ, LServer, Sender, Deliver) ->
    try delivery(LServer, Sender, Deliver) of
        Status ->
            xmpp:make_iq_result(IQ, #xmlel{name = <<"delivery">>,
                                           attrs = [{<<"xmlns">>, ?NS_MESSAGING},
                                                    {<<"status">>, Status}]})
    catch
        throw:{bad_request, Text} ->
            xmpp:make_error(IQ, xmpp:err_bad_request(Text, xmpp:get_lang(IQ)));
        Class:Reason:St ->
            %% The IQ's id and sender only: its message may hold a one-time code, never logged.
            ?ERROR_MSG("Failed to deliver (iq ~ts from ~ts):~n~ts",
                       [xmpp:get_id(IQ), jid:encode(xmpp:get_from(IQ)),
                        misc:format_exception(2, Class, Reason, St)]),
            xmpp:make_error(IQ, xmpp:err_internal_server_error())
    end.

%% gen_iq_handler decodes an IQ's child with the xmpp codec unless the module does it: ours is not
%% the codec's, so it stays the element it is.
decode_iq_subel(El) ->
    El.

delivery(LServer, Sender, #xmlel{attrs = Attrs, children = Children}) ->
    Msg = case [El || #xmlel{name = <<"message">>} = El <- Children] of
              [El] ->
                  try xmpp:decode(El, ?NS_CLIENT, [ignore_els])
                  catch _:{xmpp_codec, _} -> throw({bad_request, <<"The message does not parse">>})
                  end;
              _ ->
                  throw({bad_request, <<"Expected one message">>})
          end,
    #message{from = From, to = To} = Msg,
    Senders = [From | on_behalf_of(fxml:get_attr_s(<<"on-behalf-of">>, Attrs))],
    Recipient = scope_of(To),
    case From of
        #jid{lserver = Sender} -> ok;
        _ -> throw({bad_request, <<"The message must come from the messaging host">>})
    end,
    case To of
        #jid{lserver = LServer, lresource = <<>>} when Recipient /= none -> ok;
        _ -> throw({bad_request, <<"The message must go to an app's account of this host">>})
    end,
    lists:all(fun(J) -> scope_of(J) == Recipient end, Senders) orelse
        throw({bad_request, <<"Addresses of another app are out of reach">>}),
    #jid{luser = LUser} = To,
    %% A signed-in account exists: the account check (the auth method's round trip to the control
    %% plane) is left for a recipient who is not signed in.
    case reach(LUser, LServer) /= offline orelse ejabberd_auth:user_exists(LUser, LServer) of
        false ->
            <<"no-account">>;
        true ->
            Allowed = fun(J) ->
                          allow == ejabberd_hooks:run_fold(privacy_check_packet, LServer, allow,
                                                           [To, Msg#message{from = J}, in])
                      end,
            case lists:all(Allowed, Senders) of
                false -> <<"blocked">>;
                %% Looked at again after the account check: a login meanwhile is reached at once.
                true -> hand_over(Msg, reach(LUser, LServer), LServer)
            end
    end.

%% How a message reaches the user now:
%%   available: a session at priority 0 or more, reached as ejabberd routes any message to a bare JID;
%%   {signing_in, Resources}: sessions signed in that have not sent their initial presence yet. Their
%%     initial presence delivers what offline storage holds, so a message stored just as it is handled
%%     would wait there for the next login (the OTP an app requests the instant its login ends);
%%     each such session is handed the message instead;
%%   offline: no session to hand it to (or only ones at a negative priority, or gone unavailable,
%%     which take none: offline storage keeps it for their next presence).
reach(LUser, LServer) ->
    %% One read of the user's sessions: each one's priority (undefined until it sends a presence) and
    %% whether it ever was available.
    Sessions = [{R, proplists:get_value(priority, Info), proplists:get_bool(svc_announced, Info)}
                || {R, Info} <- ejabberd_sm:get_user_info(LUser, LServer)],
    case lists:any(fun({_, P, _}) -> is_integer(P) andalso P >= 0 end, Sessions) of
        true ->
            available;
        false ->
            case [R || {R, undefined, false} <- Sessions] of
                [] -> offline;
                Resources -> {signing_in, Resources}
            end
    end.

on_behalf_of(<<>>) ->
    [];
on_behalf_of(Text) ->
    try [jid:decode(Text)]
    catch _:{bad_jid, _} -> throw({bad_request, <<"on-behalf-of is not a JID">>})
    end.

scope_of(#jid{luser = <<>>}) -> none;
scope_of(#jid{luser = LUser}) -> scope(LUser).

%% As ejabberd_sm routes a message to a bare JID: to the available sessions (and to those still signing
%% in), or else to the offline store, whose answer is kept here rather than bounced unseen. (A session
%% that ends meanwhile leaves the routed message to ejabberd_sm, which stores it offline too.)
hand_over(Msg, offline, LServer) ->
    %% Marked as answered: offline storage drops the mark, and a session reached meanwhile
    %% (offline_message/1) is answered online.
    case ejabberd_hooks:run_fold(offline_message_hook, LServer,
                                 {bounce, xmpp:put_meta(Msg, svc_answered_online, true)}, []) of
        {offlined, _} -> <<"stored">>;
        {online, _} -> <<"online">>;
        _ -> <<"refused">>
    end;
hand_over(Msg, Reach, _LServer) ->
    %% The answer says it arrived: the notice is for messages read later from offline storage.
    route_to(xmpp:put_meta(Msg, svc_answered_online, true), Reach),
    <<"online">>.

%% ejabberd_sm offers offline storage (mod_offline) a message to a bare JID for which it found no
%% available session. A message of the messaging component goes, as its deliveries do, to a session
%% still signing in, or to one that became available since: offline storage, emptied by a session's
%% initial presence, could take it just after that presence and keep it until a later login. This is
%% the way of what a lost connection never acknowledged (mod_stream_mgmt's resend when it ends): it
%% ends as the same device's next session signs in. Offered again once at most, so no loop.
offline_message({_, #message{to = #jid{luser = LUser, lserver = LServer}} = Msg} = Acc) ->
    case is_ours(Msg, LServer)
        andalso not xmpp:get_meta(Msg, svc_offered_again, false) of
        true ->
            case reach(LUser, LServer) of
                offline -> Acc;
                %% The message's own answered mark is kept: one resent after it came from offline
                %% storage has none, and its arrival is still to be told.
                Reach ->
                    route_to(xmpp:put_meta(Msg, svc_offered_again, true), Reach),
                    {stop, {online, Msg}}
            end;
        false ->
            Acc
    end;
offline_message(Acc) ->
    Acc.

route_to(Msg, available) ->
    ejabberd_router:route(Msg);
route_to(#message{to = To} = Msg, {signing_in, Resources}) ->
    %% To each session's full JID, which ejabberd hands to the session whatever its presence.
    lists:foreach(fun(Resource) -> ejabberd_router:route(Msg#message{to = jid:replace_resource(To, Resource)}) end,
                  Resources).

%% A component message marked as the bundle's (<svc xmlns='urn:svc:messaging:0'/>) reached a client
%% from offline storage (or was routed to a session that ended meanwhile): the component is told, with
%% the message's id. One handed to an online session was answered as such (the meta flag is not stored).
user_receive_packet({#message{type = Type, from = #jid{lserver = From}, id = Id} = Msg,
                     #{lserver := LServer, jid := Client}} = Acc) when Type /= error ->
    case is_ours(Msg, LServer)
        andalso not xmpp:get_meta(Msg, svc_answered_online, false) of
        true ->
            Notice = #xmlel{name = <<"delivered">>,
                            attrs = [{<<"xmlns">>, ?NS_MESSAGING}, {<<"id">>, Id},
                                     {<<"to">>, jid:encode(Client)}]},
            ejabberd_router:route(#message{from = jid:make(LServer), to = jid:make(From),
                                           type = normal, sub_els = [Notice]});
        false ->
            ok
    end,
    Acc;
user_receive_packet(Acc) ->
    Acc.

%% A message of the messaging component, marked as the bundle's.
is_ours(#message{from = #jid{lserver = From}} = Msg, LServer) ->
    messaging_host(LServer) == From andalso is_marked(Msg).

is_marked(#message{sub_els = Els}) ->
    lists:any(fun(#xmlel{name = <<"svc">>, attrs = Attrs}) ->
                      fxml:get_attr_s(<<"xmlns">>, Attrs) == ?NS_MESSAGING;
                 (_) -> false
              end, Els).

messaging_host(LServer) ->
    gen_mod:get_module_opt(LServer, ?MODULE, messaging_host).

%%--------------------------------------------------------------------
%% Archiving
%%--------------------------------------------------------------------

%% mod_mam asks before it stores a one-to-one message (LUser: the archive's owner) or a room
%% message (LUser: the room). An app's messages are stored only while its flag is 1; an app never
%% told about is not archived. Accounts of no app keep mod_mam's own rules.
store_mam_message(Pkt, LUser, _LServer, _Peer, _Nick, _Type, _Dir) ->
    case scope(LUser) of
        none -> Pkt;
        Prefix ->
            case archiving(Prefix) of
                1 -> Pkt;
                0 -> {stop, drop}
            end
    end.

archiving(Prefix) ->
    case mnesia:dirty_read(svc_archiving, Prefix) of
        [#svc_archiving{enabled = Enabled}] -> Enabled;
        [] -> 0
    end.

%%--------------------------------------------------------------------
%% Commands (mod_http_api: POST /api/svc_set_archiving, /api/svc_get_archiving, /api/svc_revoke_user)
%%--------------------------------------------------------------------

commands() ->
    [#ejabberd_commands{name = svc_set_archiving, tags = [mam],
                        desc = "Archive an app's one-to-one and room messages, or stop archiving them",
                        module = ?MODULE, function = set_archiving,
                        args = [{prefix, binary}, {enabled, integer}],
                        args_desc = ["The app's chat prefix", "1 to archive, 0 not to"],
                        args_example = [<<"abc123defg">>, 1],
                        result = {res, rescode}},
     #ejabberd_commands{name = svc_get_archiving, tags = [mam],
                        desc = "Whether an app's messages are archived (1) or not (0)",
                        module = ?MODULE, function = get_archiving,
                        args = [{prefix, binary}],
                        args_desc = ["The app's chat prefix"],
                        args_example = [<<"abc123defg">>],
                        result = {enabled, integer}},
     #ejabberd_commands{name = svc_revoke_user, tags = [session],
                        desc = "Close a user's sessions, and any login that raced the revocation",
                        module = ?MODULE, function = revoke_user,
                        args = [{user, binary}, {host, binary}],
                        args_desc = ["The user's local part", "Its host"],
                        args_example = [<<"abc123defg.ana">>, <<"chat.localhost">>],
                        result = {sessions_closed, integer}},
     #ejabberd_commands{name = svc_revoke_prefix, tags = [session],
                        desc = "Close the sessions of every identity of an org, and any login that raced it",
                        module = ?MODULE, function = revoke_prefix,
                        args = [{prefix, binary}, {host, binary}],
                        args_desc = ["The org's node prefix, <app prefix>.+<org key>.", "The host"],
                        args_example = [<<"abc123defg.+k3y0rg5abc12.">>, <<"chat.localhost">>],
                        result = {sessions_closed, integer}},
     #ejabberd_commands{name = svc_flush_org, tags = [session],
                        desc = "Forget the cached answers about who may reach whom in an org",
                        module = ?MODULE, function = flush_org,
                        args = [{key, binary}],
                        args_desc = ["The org's key"],
                        args_example = [<<"k3y0rg5abc12">>],
                        result = {res, rescode}},
     #ejabberd_commands{name = svc_open_conversation, tags = [muc_room],
                        desc = "Make a business's conversation room with its people, or bring them back into it",
                        module = svc_conversations, function = open,
                        args = [{name, binary}, {service, binary}, {title, binary}, {description, binary},
                                {subject, binary}, {max_users, integer},
                                {members, {list, {member, {tuple, [{jid, binary}, {nick, binary}]}}}}],
                        args_desc = ["The room's name, <prefix>.+<org key>.c+<room key>", "The MUC service",
                                     "The room's title", "Its description", "Its subject (may be empty)",
                                     "Its most occupants",
                                     "Each member's JID and nickname (also subscribed under it)"],
                        args_example = [<<"abc123defg.+k3y0rg5abc12.c+r00mk3y123">>, <<"conference.chat.localhost">>,
                                        <<"Acme">>, <<"We answer within the hour">>, <<"Hello!">>, 200,
                                        [{<<"abc123defg.ana@chat.localhost">>, <<"Ana">>}]],
                        result = {res, rescode}},
     #ejabberd_commands{name = svc_set_conversation_staff, tags = [muc_room],
                        desc = "Bring a business's rooms to its inbox's staff: members and subscribers, nobody else of it",
                        module = svc_conversations, function = set_staff,
                        args = [{prefix, binary}, {service, binary}, {rooms, {list, {room, binary}}},
                                {members, {list, {member, {tuple, [{jid, binary}, {nick, binary}]}}}}],
                        args_desc = ["The business's node prefix, <prefix>.+<org key>.", "The MUC service",
                                     "The rooms' names", "The staff, each with their nickname"],
                        args_example = [<<"abc123defg.+k3y0rg5abc12.">>, <<"conference.chat.localhost">>,
                                        [<<"abc123defg.+k3y0rg5abc12.c+r00mk3y123">>],
                                        [{<<"abc123defg.+k3y0rg5abc12.st4ff3r123@chat.localhost">>, <<"Acme (1)">>}]],
                        result = {rooms, integer}},
     #ejabberd_commands{name = svc_set_conversation_titles, tags = [muc_room],
                        desc = "Give a business's conversation rooms the public chat's name and line",
                        module = svc_conversations, function = set_titles,
                        args = [{rooms, {list, {room, binary}}}, {service, binary}, {title, binary},
                                {description, binary}],
                        args_desc = ["The rooms' names", "The MUC service", "The rooms' title", "Their description"],
                        args_example = [[<<"abc123defg.+k3y0rg5abc12.c+r00mk3y123">>], <<"conference.chat.localhost">>,
                                        <<"Acme">>, <<"We answer within the hour">>],
                        result = {rooms, integer}},
     #ejabberd_commands{name = svc_set_rooms_max_users, tags = [muc_room],
                        desc = "Give rooms a new occupant limit; answers the rooms the service does not have",
                        module = svc_conversations, function = set_max_users,
                        args = [{rooms, {list, {room, binary}}}, {service, binary}, {max_users, integer}],
                        args_desc = ["The rooms' names", "The MUC service", "Their new occupant limit"],
                        args_example = [[<<"abc123defg.lobby">>], <<"conference.chat.localhost">>, 250],
                        result = {missing, {list, {room, string}}}},
     #ejabberd_commands{name = svc_set_room_places, tags = [muc_room],
                        desc = "Put people in or out of an org's rooms (a circle's, a team's): member, outcast or none, rooms side by side",
                        module = svc_circles, function = set_places,
                        args = [{service, binary},
                                {places, {list, {place, {tuple, [{room, binary}, {jid, binary}, {place, binary}]}}}}],
                        args_desc = ["The MUC service",
                                     "Each room's name, a person's JID and their place there: member, outcast or none"],
                        args_example = [<<"conference.chat.localhost">>,
                                        [{<<"abc123defg.+k3y0rg5abc12.r+r00mk3y123">>,
                                          <<"abc123defg.+k3y0rg5abc12.m3mb3rk3y1@chat.localhost">>, <<"outcast">>}]],
                        result = {rooms, integer}},
     #ejabberd_commands{name = svc_set_bookmarks, tags = [private],
                        desc = "Replace many accounts' room bookmarks (XEP-0048 storage) at once",
                        module = svc_circles, function = set_bookmarks,
                        args = [{host, binary},
                                {bookmarks, {list, {bookmark, {tuple, [{user, binary}, {storage, binary}]}}}}],
                        args_desc = ["The accounts' host",
                                     "Each account's local part and its <storage xmlns='storage:bookmarks'/>"],
                        args_example = [<<"chat.localhost">>,
                                        [{<<"abc123defg.+k3y0rg5abc12.m3mb3rk3y1">>,
                                          <<"<storage xmlns='storage:bookmarks'/>">>}]],
                        result = {accounts, integer}},
     #ejabberd_commands{name = svc_archive_size, tags = [mam],
                        desc = "How many messages an account's archive holds (the bundle's Mnesia archive)",
                        longdesc = "For operators checking retention, such as a deleted org's history.",
                        module = ?MODULE, function = archive_size,
                        args = [{user, binary}, {host, binary}],
                        args_desc = ["The account's local part", "Its host"],
                        args_example = [<<"abc123defg.ana">>, <<"chat.localhost">>],
                        result = {messages, integer}}].

%% mod_mam_mnesia keeps an account's messages in one bag keyed by {LUser, LServer}.
archive_size(User, Host) ->
    length(mnesia:dirty_read(archive_msg, {jid:nodeprep(User), jid:nameprep(Host)})).

%% Bad arguments answer {error, Text}: HTTP 400 with the text, never a silent rescode 1.
set_archiving(Prefix, Enabled) when Enabled == 0; Enabled == 1 ->
    with_valid_prefix(Prefix, fun() ->
        Row = #svc_archiving{prefix = Prefix, enabled = Enabled},
        case mnesia:transaction(fun() -> mnesia:write(Row) end) of
            {atomic, ok} ->
                ?INFO_MSG("Archiving of app ~ts set to ~B", [Prefix, Enabled]),
                ok;
            {aborted, Reason} ->
                ?ERROR_MSG("Cannot store the archiving flag of app ~ts: ~p", [Prefix, Reason]),
                {error, <<"Cannot store the archiving flag">>}
        end
    end);
set_archiving(_Prefix, _Enabled) ->
    {error, <<"enabled must be 0 or 1">>}.

get_archiving(Prefix) ->
    with_valid_prefix(Prefix, fun() -> archiving(Prefix) end).

%% Prefixes are exactly ten lowercase letters and digits (the control plane mints them).
with_valid_prefix(Prefix, Fun) ->
    case re:run(Prefix, <<"^[a-z0-9]{10}\\z">>, [{capture, none}]) of
        match -> Fun();
        nomatch -> {error, <<"prefix must be 10 lowercase letters or digits">>}
    end.
