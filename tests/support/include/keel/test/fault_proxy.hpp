#pragma once

// A TCP proxy that lies: placed between a client (a keel::redis connection, a service) and a
// real server on this machine, it forwards bytes both ways and injects, when told to, the
// faults a real network has:
//
//   set_latency(d, ms)    each chunk travelling in direction d is held that long
//   set_bandwidth(b)      at most b bytes per second per direction of each connection
//   stall()               every open connection, and every one accepted until heal(), goes
//                         silent for good: open, bytes neither forwarded nor answered (a
//                         half-open peer: its host vanished, or a NAT forgot the flow)
//   reset_mid_reply()     the next chunk from the server on each open connection is cut in
//   close_mid_reply()     half: the first half reaches the client, then RST (SO_LINGER 0)
//                         or FIN, and the server side is closed too
//   reset_all()           RST every open connection now
//   heal()                no latency, no bandwidth limit, no stall for connections accepted
//                         from now on (those that went silent stay silent, as they would)
//
// It runs on its own thread and io_context. Its memory is bounded: at most max_connections
// connections (more are closed at once), and per direction of each at most
// max_buffered_bytes held for latency (reading stops while that much waits).

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace keel::test {

struct fault_proxy_stats {
    std::uint64_t accepted = 0;
    std::uint64_t open = 0;
    std::uint64_t to_server_bytes = 0;  // forwarded client -> server
    std::uint64_t to_client_bytes = 0;  // forwarded server -> client
    std::uint64_t cuts = 0;             // connections cut mid-reply (reset or close)
    std::uint64_t buffered_peak = 0;    // the most bytes held at once, all connections
};

class fault_proxy {
  public:
    enum class direction { to_server, to_client };
    static constexpr std::size_t max_connections = 512;
    static constexpr std::size_t max_buffered_bytes = 256 * 1024;

    // Listens on a free loopback port; each connection goes to 127.0.0.1:upstream_port.
    explicit fault_proxy(std::uint16_t upstream_port);
    ~fault_proxy();
    fault_proxy(const fault_proxy&) = delete;
    fault_proxy& operator=(const fault_proxy&) = delete;

    std::uint16_t port() const;
    std::string url() const;  // redis://127.0.0.1:<port>

    void set_latency(direction d, std::chrono::milliseconds delay);
    void set_bandwidth(std::size_t bytes_per_second);  // 0: unlimited
    void stall();
    void reset_mid_reply();
    void close_mid_reply();
    void reset_all();
    void heal();

    fault_proxy_stats stats() const;

    struct impl;

  private:
    std::shared_ptr<impl> impl_;
};

}  // namespace keel::test
