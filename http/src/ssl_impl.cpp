// Boost.Asio's SSL support, compiled once for Keel (BOOST_ASIO_SEPARATE_COMPILATION): the
// server's TLS and the HTTP client use it, and so may a test's TLS server.
#include <boost/asio/ssl/impl/src.hpp>
