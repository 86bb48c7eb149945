// The Boost.Asio and Boost.Beast parts kube's HTTP client (https.cc) and server (server.cc)
// both speak, under the short names Beast's own examples use.
#pragma once
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

namespace kube {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

}  // namespace kube
