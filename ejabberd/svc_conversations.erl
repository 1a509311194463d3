%%% svc_conversations: the rooms of businesses' customer conversations (docs/businesses.md).
%%%
%%% A business's one public chat is a room per customer, <prefix>.+<org key>.c+<room key> on the MUC
%%% service: members-only, its members the customer and the staff who work the inbox, each also
%%% subscribed (MUC/Sub) under the nickname the control plane gives them, so that they receive the
%%% conversation without joining it, offline included. Who may post is mod_svc_scope's question to the
%%% control plane; who is in is the room's affiliations, kept here.
%%%
%%% The control plane calls two commands (registered by mod_svc_scope): svc_open_conversation makes
%%% or refreshes one room with its people in one call, and svc_set_conversation_staff applies a change
%%% of the inbox's staff to every conversation room of a business at once.
-module(svc_conversations).

-export([is_conversation/1, open/7, set_staff/4]).

-include("logger.hrl").
-include("xmpp.hrl").

%% What a subscriber receives: the messages and the subject.
-define(NODES, [?NS_MUCSUB_NODES_MESSAGES, ?NS_MUCSUB_NODES_SUBJECT]).
%% Rooms changed side by side by a staff change.
-define(WORKERS, 8).

%% Whether a room node is a conversation room: <prefix>.+<12-character org key>.c+<room key>.
-spec is_conversation(binary()) -> boolean().
is_conversation(LUser) ->
    case binary:split(LUser, <<".">>) of
        [_Prefix, <<"+", Rest/binary>>] ->
            case binary:split(Rest, <<".">>) of
                [Key, <<"c+", RoomKey/binary>>] when byte_size(Key) == 12, RoomKey /= <<>> -> true;
                _ -> false
            end;
        _ ->
            false
    end.

%% Makes the room with its members (JID => nickname), or, when it exists (a conversation reopened),
%% makes each of them a member and a subscriber under that nickname. The title and description are
%% the public chat's name and line; the subject, when not empty, is the business's greeting: what a
%% customer sees first.
open(Name, Service, Title, Description, Subject, MaxUsers, Members) ->
    case {jid:nodeprep(Name), people(Members)} of
        {error, _} -> {error, <<"invalid room name">>};
        {_, {error, _} = Error} -> Error;
        {Room, People} ->
            case is_conversation(Room) andalso ejabberd_router:is_my_route(Service) of
                false ->
                    {error, <<"not a conversation room of this server">>};
                true ->
                    case mod_muc:find_online_room(Room, Service) of
                        {ok, Pid} -> lists:foreach(fun({JID, Nick}) -> add(Pid, JID, Nick) end, People);
                        error -> create(Room, Service, [{title, Title}, {description, Description},
                                                        {subject, Subject}, {max_users, MaxUsers}],
                                        People)
                    end
            end
    end.

create(Room, Service, Given, People) ->
    ServerHost = ejabberd_router:host_of_route(Service),
    Own = Given ++ [{persistent, true}, {public, false},
           {public_list, false}, {members_only, true},
           %% A moderated room lets a user back in with the role they last had (docs/orgs.md).
           {moderated, false},
           %% Private messages through the room would reach a customer outside the conversation.
           {allow_private_messages, false}, {allow_change_subj, false}, {allow_user_invites, false},
           {allow_subscription, true}, {mam, true},
           {affiliations, [{jid:tolower(JID), {member, <<>>}} || {JID, _} <- People]},
           {subscribers, [{JID, Nick, ?NODES} || {JID, Nick} <- People]}],
    Opts = lists:ukeymerge(1, lists:keysort(1, Own),
                           lists:keysort(1, mod_muc_opt:default_room_options(ServerHost))),
    case mod_muc:create_room(Service, Room, Opts) of
        ok ->
            {atomic, _} = mod_muc:store_room(ServerHost, Service, Room, Opts),
            ok;
        {error, Reason} ->
            ?ERROR_MSG("Cannot make conversation room ~ts: ~p", [Room, Reason]),
            {error, <<"cannot make the room">>}
    end.

%% Applies a change of the inbox's staff to every conversation room whose name starts with Prefix
%% (<prefix>.+<org key>.c+): the removed stop being members and subscribers (an occupant among them
%% is sent out at once), the others become both under their nickname. Answers how many rooms.
set_staff(Prefix, Service, Members, Removed) ->
    case {re:run(Prefix, <<"^[a-z0-9]{10}\\.\\+[a-z0-9]{12}\\.c\\+\\z">>, [{capture, none}]),
          people(Members), jids(Removed)} of
        {nomatch, _, _} -> {error, <<"prefix must be a business's conversation rooms': <prefix>.+<key>.c+">>};
        {_, {error, _} = Error, _} -> Error;
        {_, _, {error, _} = Error} -> Error;
        {match, People, Gone} ->
            Rooms = [Pid || {Name, _Host, Pid} <- mod_muc:get_online_rooms(Service),
                            binary:longest_common_prefix([Name, Prefix]) == byte_size(Prefix)],
            Apply = fun(Pid) ->
                            lists:foreach(fun(JID) -> remove(Pid, JID) end, Gone),
                            lists:foreach(fun({JID, Nick}) -> add(Pid, JID, Nick) end, People)
                    end,
            %% Each room is a process of its own: a few workers go through them side by side.
            misc:peach(fun(Share) -> lists:foreach(Apply, Share) end, shares(Rooms, ?WORKERS)),
            length(Rooms)
    end.

%% The list dealt into N shares (fewer when it is shorter).
shares(List, N) ->
    Indexed = lists:zip(lists:seq(0, length(List) - 1), List),
    [[X || {I, X} <- Indexed, I rem N == K] || K <- lists:seq(0, min(N, length(List)) - 1)].

add(Pid, JID, Nick) ->
    case mod_muc_room:change_item(Pid, JID, affiliation, member, <<>>) of
        {ok, _} -> ok;
        {error, Reason} -> ?WARNING_MSG("Cannot make ~ts a member: ~p", [jid:encode(JID), Reason])
    end,
    case mod_muc_room:subscribe(Pid, JID, Nick, ?NODES) of
        {ok, _} -> ok;
        {error, Text} -> ?WARNING_MSG("Cannot subscribe ~ts as ~ts: ~ts", [jid:encode(JID), Nick, Text])
    end.

remove(Pid, JID) ->
    mod_muc_room:change_item(Pid, JID, affiliation, none, <<>>),
    mod_muc_room:unsubscribe(Pid, JID).

%% [{Jid, Nick}] as the HTTP API passes them, as bare JIDs.
people(Members) ->
    try [{bare(Jid), Nick} || {Jid, Nick} <- Members, Nick /= <<>> orelse throw(nick)]
    catch throw:nick -> {error, <<"every member needs a nickname">>};
          throw:jid -> {error, <<"invalid member JID">>}
    end.

jids(Jids) ->
    try [bare(Jid) || Jid <- Jids]
    catch throw:jid -> {error, <<"invalid JID">>}
    end.

bare(Jid) ->
    try jid:remove_resource(jid:decode(Jid))
    catch _:_ -> throw(jid)
    end.
