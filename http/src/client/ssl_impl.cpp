// Boost.Asio's SSL support, compiled once for Keel (BOOST_ASIO_SEPARATE_COMPILATION): the
// HTTP client uses it, and so may a test's TLS server linking keel::http_client.
#include <boost/asio/ssl/impl/src.hpp>
