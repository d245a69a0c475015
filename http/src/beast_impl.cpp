// Boost.Beast, compiled once for every Keel target (BOOST_BEAST_SEPARATE_COMPILATION).
#include <boost/beast/src.hpp>
