// The one translation unit that compiles Asio, Asio's SSL support and Beast
// (BOOST_ASIO_SEPARATE_COMPILATION / BOOST_BEAST_SEPARATE_COMPILATION): every other
// file includes their headers only, which keeps rebuilds fast on a 2-core machine.
#include <boost/asio/impl/src.hpp>
#include <boost/asio/ssl/impl/src.hpp>
#include <boost/beast/src.hpp>
