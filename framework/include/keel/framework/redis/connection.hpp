#pragma once

/// @file
/// The Redis client: one connection that many coroutines share.
///
/// Asio owns the socket (TCP or unix); hiredis only parses replies.
/// Requests issued while a write is in flight are coalesced into the next single write
/// (automatic pipelining); replies complete their callers in order. Each request has a
/// timeout and honours its caller's cancellation slot: a cancelled or timed-out request's
/// reply is still read and discarded, so the connection stays usable.
///
/// When the server goes away the connection reconnects with exponential backoff. Requests
/// not yet written wait for the new connection (until their timeout); requests already
/// written fail with errc::connection_lost and are never resent, since Redis may have run
/// them. On every (re)connect it authenticates, selects the database and loads registered
/// scripts. A silent server is noticed, not waited for forever: while replies are awaited,
/// no byte for silence_timeout drops the connection and reconnects (in-flight requests fail
/// with connection_lost); when idle it sends a PING after health_check_interval, which the
/// same bound covers. So with the defaults a server, or a network, that went silent is
/// noticed within 3 s while busy and 4 s when idle (docs/architecture.md, "A network that
/// lies").
///
/// Thread-safety: every member function may be called from any thread. The connection runs
/// on the executor it was created with, which must not run handlers concurrently (an
/// io_context run by one thread, or a strand). Completions run on each caller's own
/// associated executor.
///
/// Lanes: created with several io_context executors (a service's threads, one io_context
/// each), a connection to one server keeps a socket per io_context and sends each request on
/// the lane of the io_context its caller's thread runs, so a request and its reply never
/// cross threads; callers on any other thread use the first lane. Requests from one thread keep
/// their order; requests from different threads have none between them until one is answered.
/// replicate() waits for the writes sent from the calling thread (WAIT is per socket), which
/// is the write it follows when both come from one coroutine. Its WAIT is refused when the
/// socket it would go out on is not the one the write's reply came on (a reconnect in
/// between): WAIT there would count replicas for writes that socket never made.
///
/// A `redis-cluster://` URL gives the same API over a Redis Cluster: one such connection per
/// primary, each command routed by the hash slot of its keys (which must share one slot:
/// use hash tags), MOVED and ASK followed, TRYAGAIN and CLUSTERDOWN retried with backoff
/// within the request's timeout, and requests not yet written held across a failover until
/// the slot map names the promoted replica. connection_lost keeps its meaning: never resent.
/// Keyless commands go to any primary; SCRIPT, FUNCTION, FLUSHALL and FLUSHDB to every one;
/// MULTI, WATCH, SELECT and (P|S)SUBSCRIBE are refused (errc::unsupported). The rules are in
/// docs/architecture.md, "Redis Cluster".

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <charconv>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <keel/framework/expected.hpp>
#include <keel/framework/redis/error.hpp>
#include <keel/framework/redis/reply.hpp>
#include <keel/framework/redis/script.hpp>
#include <keel/framework/redis/url.hpp>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace keel::redis {

namespace asio = boost::asio;

/// How a connection reaches its server and when it gives up on it.
struct connection_options {
    /// The server's URL: redis://, unix:// or redis-cluster:// (keel/framework/redis/url.hpp).
    std::string url = "redis://127.0.0.1:6379";
    /// Connecting, authenticating and selecting the database, at most.
    std::chrono::milliseconds connect_timeout{2'000};
    /// Default per-request timeout; zero disables it. A request may pass its own.
    std::chrono::milliseconds request_timeout{5'000};
    /// Idle time after which a PING checks the connection; zero disables it.
    std::chrono::milliseconds health_check_interval{1'000};
    /// While replies are awaited, the longest the server may send nothing before the
    /// connection is taken for dead, dropped and reopened; zero disables it. A request given a
    /// longer timeout of its own (execute's argument; replicate's WAIT) may be that silent.
    /// The health-check PING waits at most this long too.
    std::chrono::milliseconds silence_timeout{3'000};
    /// The first reconnect delay, doubled after each failure up to reconnect_max.
    std::chrono::milliseconds reconnect_min{20};
    /// The longest delay between reconnect attempts.
    std::chrono::milliseconds reconnect_max{2'000};
    /// The CLIENT SETNAME of every socket; empty: none.
    std::string client_name = "keel";
    /// Durability on failover. Redis replicates asynchronously: a primary can acknowledge a
    /// write and die before a replica has it. With wait_replicas > 0, callers that must not
    /// lose an acknowledged write (process transitions, entity saves and lock tokens) follow
    /// it with replicate(key), which waits (WAIT) until that many replicas of the key's node
    /// have every write this connection made there, up to replica_timeout. Zero: no waiting.
    int wait_replicas = 0;
    /// How long replicate() waits for the replicas.
    std::chrono::milliseconds replica_timeout{1'000};
};

/// One command, encoded once in the Redis protocol. Arguments are strings or integers.
class command {
  public:
    /// The command `name` with `args`.
    template <class... Args>
    explicit command(std::string_view name, const Args&... args) {
        arg_view views[] = {arg_view(name), arg_view(args)...};
        std::string_view parts[sizeof...(Args) + 1];
        for (std::size_t i = 0; i < std::size(views); ++i) parts[i] = views[i].view();
        payload_ = encode(parts);
    }
    ///@{
    /// A command whose name is args[0].
    static command from_args(std::span<const std::string_view> args);
    static command from_args(std::span<const std::string> args);
    ///@}

    ///@{
    /// The command in the Redis protocol.
    const std::string& payload() const& { return payload_; }
    std::string&& payload() && { return std::move(payload_); }
    ///@}

  private:
    command() = default;
    static std::string encode(std::span<const std::string_view> args);

    // An argument as text: strings by reference, integers formatted into local storage.
    class arg_view {
      public:
        arg_view(std::string_view s) : view_(s) {}
        arg_view(const std::string& s) : view_(s) {}
        arg_view(const char* s) : view_(s) {}
        template <std::integral I>
        requires(!std::same_as<I, bool>) arg_view(I value) {
            auto [end, ec] = std::to_chars(digits_, digits_ + sizeof digits_, value);
            length_ = static_cast<std::size_t>(end - digits_);
        }
        arg_view(const arg_view&) = delete;
        std::string_view view() const {
            return view_.data() ? view_ : std::string_view(digits_, length_);
        }

      private:
        std::string_view view_{};
        char digits_[24]{};
        std::size_t length_ = 0;
    };

    std::string payload_;
};

/// A reply, or why there is none.
using result = expected<reply, error>;

/// A connection's figures; on a cluster, summed over its nodes.
struct connection_stats {
    std::uint64_t requests = 0;      ///< accepted by execute
    std::uint64_t writes = 0;        ///< socket writes (requests / writes = pipelining factor)
    std::uint64_t replies = 0;       ///< replies read
    std::uint64_t connects = 0;      ///< successful connects, the first included
    std::uint64_t outstanding = 0;   ///< queued or written requests still awaiting their reply
    bool connected = false;          ///< every lane (on a cluster, every node) is connected
    std::uint64_t redirections = 0;  ///< cluster: MOVED and ASK replies followed
    std::uint64_t refreshes = 0;     ///< cluster: slot map refreshes
    ///@{
    /// Requests Redis refused because it accepts no writes: maxmemory reached (OOM), a failed
    /// RDB or AOF write such as a full disk (MISCONF), a node that became a replica (READONLY).
    std::uint64_t refused_oom = 0;
    std::uint64_t refused_misconf = 0;
    std::uint64_t refused_readonly = 0;
    ///@}
};

namespace detail {
class connection_impl;
class cluster_impl;
class write_refusals;
struct route;
}  // namespace detail

/// A connection to a Redis server or cluster that many coroutines share; see the file's
/// description.
class connection {
  public:
    /// The completion signature of async_execute().
    using completion_signature = void(result);
    /// The type-erased handler async_execute() stores.
    using handler_type = asio::any_completion_handler<completion_signature>;

    /// Validates the URL and starts connecting in the background. A bad URL gives
    /// errc::bad_url; an unreachable server is not an error here: requests report it.
    static expected<connection, error> create(asio::any_io_executor executor,
                                              connection_options options);
    /// One lane per executor (see Lanes above); executors of the same execution context share
    /// one. A cluster URL runs on the first executor.
    static expected<connection, error> create(std::span<const asio::any_io_executor> executors,
                                              connection_options options);
    /// Moves the connection; the moved-from object is unusable.
    connection(connection&&) noexcept;
    /// Moves the connection; the moved-from object is unusable.
    connection& operator=(connection&&) noexcept;
    ~connection();  ///< close()

    /// Sends a command. `timeout` zero means the connection's default.
    template <asio::completion_token_for<completion_signature> Token>
    auto async_execute(command cmd, std::chrono::milliseconds timeout, Token&& token) {
        return asio::async_initiate<Token, completion_signature>(
            [this](auto handler, command cmd, std::chrono::milliseconds timeout) {
                submit(std::move(cmd).payload(), timeout, nullptr,
                       handler_type(std::move(handler)));
            },
            token, std::move(cmd), timeout);
    }

    /// Sends a command and waits for its reply. `timeout` zero means the connection's default.
    asio::awaitable<result> execute(command cmd, std::chrono::milliseconds timeout = {});

    /// execute(command(name, args...)).
    template <class... Args>
    asio::awaitable<result> exec(std::string_view name, const Args&... args) {
        return execute(command(name, args...));
    }

    /// Sends a command to the node serving `key`'s hash slot, whatever the command's own keys:
    /// for keyless commands that must reach that node, such as WAIT after a write to `key`.
    /// On a single server it is execute().
    asio::awaitable<result> execute_at(std::string_view key, command cmd,
                                       std::chrono::milliseconds timeout = {});

    /// EVALSHA with NOSCRIPT recovery. The script must outlive the request (scripts are
    /// normally constants with static storage).
    asio::awaitable<result> eval(const script& s, std::span<const std::string> keys,
                                 std::span<const std::string> args,
                                 std::chrono::milliseconds timeout = {});

    /// After a write that must survive a failover: waits until options.wait_replicas replicas
    /// of the node serving `key` have acknowledged every write this connection sent there
    /// (WAIT on that node's connection, which holds back the requests queued behind it
    /// meanwhile). errc::not_replicated when fewer do within replica_timeout: the write is on
    /// the primary, not yet on enough replicas, and may be lost if the primary fails now.
    /// Immediate success when wait_replicas is zero.
    ///
    /// The WAIT must go out on the socket the write's reply came on (reply::session()): after
    /// a reconnect in between it is not sent and the answer is errc::not_replicated. This form
    /// takes the session of the last reply execute(), execute_at() or eval() returned on this
    /// thread, so call it right after the write, with no co_await in between; the second form
    /// names the write's reply.
    ///@{
    asio::awaitable<expected<void, error>> replicate(std::string_view key);
    asio::awaitable<expected<void, error>> replicate(std::string_view key, const reply& written);
    ///@}

    /// Registers a script to load on every (re)connect, including the current one.
    void add_script(const script& s);

    /// PING with the given timeout: success, or the reason the server cannot be reached. On a
    /// cluster, every primary must answer and the slot map must cover every slot.
    asio::awaitable<expected<void, error>> ping(std::chrono::milliseconds timeout = {});

    /// Fails every pending request with errc::closed and stops reconnecting. Idempotent.
    void close();

    /// On a cluster: every slot has a primary and every primary's connection is up.
    bool connected() const;
    /// The connection's figures.
    connection_stats stats() const;
    /// Redis's reason while it refuses writes (OOM, MISCONF, READONLY: "OOM command not allowed
    /// when used memory > 'maxmemory'"), from the first refused request until a request of a
    /// kind it refused succeeds again; nullopt while it accepts them. On a cluster, any node.
    /// The first refusal is logged at warn with that reason, its end at info.
    std::optional<std::string> write_refusal() const;
    /// While write_refusal() has a reason: one write to find out whether Redis accepts writes
    /// again (SET keel:writes-probe, expiring in 1 s; on a cluster it reaches that key's node);
    /// its success ends the refusal. Success at once when there is none.
    asio::awaitable<expected<void, error>> probe_writes(std::chrono::milliseconds timeout = {});
    /// On a cluster: the first seed node.
    const endpoint& where() const;
    /// The first lane's executor.
    const asio::any_io_executor& get_executor() const;
    /// Sockets to one server (1 on a cluster, whose nodes have one each).
    std::size_t lanes() const;
    /// Whether this is a connection to a Redis Cluster (a `redis-cluster://` URL).
    bool is_cluster() const noexcept { return cluster_ != nullptr; }

  private:
    explicit connection(std::vector<std::shared_ptr<detail::connection_impl>> lanes);
    explicit connection(std::shared_ptr<detail::cluster_impl> cluster);
    detail::connection_impl& lane_for() const;
    void submit(std::string payload, std::chrono::milliseconds timeout, const script* s,
                handler_type handler);
    asio::awaitable<result> submit_routed(std::string payload, std::chrono::milliseconds timeout,
                                          const detail::route& to);
    asio::awaitable<expected<void, error>> ping_cluster(std::chrono::milliseconds timeout);
    asio::awaitable<expected<void, error>> replicate_on(std::string_view key,
                                                        std::uint64_t session);

    std::vector<std::shared_ptr<detail::connection_impl>> lanes_;  // one server
    std::shared_ptr<detail::cluster_impl> cluster_;                // or a cluster
    std::shared_ptr<detail::write_refusals> refusals_;             // shared by the lanes or nodes
    int wait_replicas_ = 0;
    std::chrono::milliseconds replica_timeout_{};
};

}  // namespace keel::redis
