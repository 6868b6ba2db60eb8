/* Batched datagram I/O for ndnps.ndn.datagrams: recvmmsg(2) and sendmmsg(2) on a non-blocking
 * UDP socket, so one wake-up reads every datagram the socket holds and one system call sends
 * what a loop turn queued. Linux only; ndnps.ndn.datagrams falls back to one recvfrom/sendto
 * per datagram where this module is not built.
 *
 *   recv_many(fd, max, bufsize) -> list[(bytes, (host, port))]    [] when nothing waits
 *   send_many(fd, frames, addrs) -> int    datagrams the kernel took (fewer: it pushed back)
 *   sockaddr(host, port) -> bytes          the packed address send_many takes
 *
 * Errors other than EAGAIN/EWOULDBLOCK raise OSError; send_many stops at the first datagram
 * refused with an error, which it reports only if it is the first of the call (the caller
 * retries the rest, which then reports it). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#define MAX_BATCH 256
#define MAX_DATAGRAM 65536

static char *rx_buf = NULL;            /* MAX_BATCH x bufsize, grown on demand */
static size_t rx_size = 0;

static PyObject *address_tuple(const struct sockaddr_storage *ss) {
    char host[INET6_ADDRSTRLEN];
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        if (!inet_ntop(AF_INET, &a->sin_addr, host, sizeof host))
            return PyErr_SetFromErrno(PyExc_OSError);
        return Py_BuildValue("(si)", host, (int)ntohs(a->sin_port));
    }
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        if (!inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host))
            return PyErr_SetFromErrno(PyExc_OSError);
        return Py_BuildValue("(siII)", host, (int)ntohs(a->sin6_port),
                             (unsigned)ntohl(a->sin6_flowinfo), (unsigned)a->sin6_scope_id);
    }
    Py_RETURN_NONE;
}

static PyObject *recv_many(PyObject *self, PyObject *args) {
    int fd, max;
    Py_ssize_t bufsize;
    if (!PyArg_ParseTuple(args, "iin", &fd, &max, &bufsize))
        return NULL;
    if (max < 1 || max > MAX_BATCH || bufsize < 1 || bufsize > MAX_DATAGRAM) {
        PyErr_SetString(PyExc_ValueError, "max must be 1..256 and bufsize 1..65536");
        return NULL;
    }
    size_t need = (size_t)MAX_BATCH * (size_t)bufsize;
    if (rx_size < need) {
        char *grown = realloc(rx_buf, need);
        if (!grown)
            return PyErr_NoMemory();
        rx_buf = grown;
        rx_size = need;
    }
    struct mmsghdr msgs[MAX_BATCH];
    struct iovec iov[MAX_BATCH];
    struct sockaddr_storage addrs[MAX_BATCH];
    memset(msgs, 0, sizeof(struct mmsghdr) * (size_t)max);
    for (int i = 0; i < max; i++) {
        iov[i].iov_base = rx_buf + (size_t)i * (size_t)bufsize;
        iov[i].iov_len = (size_t)bufsize;
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
        msgs[i].msg_hdr.msg_name = &addrs[i];
        msgs[i].msg_hdr.msg_namelen = sizeof(struct sockaddr_storage);
    }
    int n = recvmmsg(fd, msgs, (unsigned)max, MSG_DONTWAIT, NULL);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            return PyList_New(0);
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    PyObject *out = PyList_New(n);
    if (!out)
        return NULL;
    for (int i = 0; i < n; i++) {
        /* a datagram longer than bufsize arrives truncated (MSG_TRUNC): handed up at
         * bufsize + 1 octets, so the caller's "oversize" check drops and counts it */
        Py_ssize_t len = (Py_ssize_t)msgs[i].msg_len;
        if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC)
            len = bufsize;
        PyObject *data = PyBytes_FromStringAndSize(iov[i].iov_base, len);
        if (!data) {
            Py_DECREF(out);
            return NULL;
        }
        if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) {
            PyObject *longer = PyBytes_FromStringAndSize(NULL, bufsize + 1);
            Py_DECREF(data);
            if (!longer) {
                Py_DECREF(out);
                return NULL;
            }
            memset(PyBytes_AS_STRING(longer), 0, (size_t)bufsize + 1);
            data = longer;
        }
        PyObject *addr = address_tuple(&addrs[i]);
        if (!addr) {
            Py_DECREF(data);
            Py_DECREF(out);
            return NULL;
        }
        PyObject *pair = PyTuple_Pack(2, data, addr);
        Py_DECREF(data);
        Py_DECREF(addr);
        if (!pair) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, pair);
    }
    return out;
}

static PyObject *send_many(PyObject *self, PyObject *args) {
    int fd;
    PyObject *frames, *addrs;
    if (!PyArg_ParseTuple(args, "iO!O!", &fd, &PyList_Type, &frames, &PyList_Type, &addrs))
        return NULL;
    Py_ssize_t total = PyList_GET_SIZE(frames);
    if (PyList_GET_SIZE(addrs) != total) {
        PyErr_SetString(PyExc_ValueError, "frames and addrs differ in length");
        return NULL;
    }
    struct mmsghdr msgs[MAX_BATCH];
    struct iovec iov[MAX_BATCH];
    Py_ssize_t done = 0;
    while (done < total) {
        Py_ssize_t n = total - done < MAX_BATCH ? total - done : MAX_BATCH;
        memset(msgs, 0, sizeof(struct mmsghdr) * (size_t)n);
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *frame = PyList_GET_ITEM(frames, done + i);
            PyObject *addr = PyList_GET_ITEM(addrs, done + i);
            if (!PyBytes_Check(frame) || !PyBytes_Check(addr)) {
                PyErr_SetString(PyExc_TypeError, "frames and addrs must hold bytes");
                return NULL;
            }
            iov[i].iov_base = PyBytes_AS_STRING(frame);
            iov[i].iov_len = (size_t)PyBytes_GET_SIZE(frame);
            msgs[i].msg_hdr.msg_iov = &iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
            msgs[i].msg_hdr.msg_name = PyBytes_AS_STRING(addr);
            msgs[i].msg_hdr.msg_namelen = (socklen_t)PyBytes_GET_SIZE(addr);
        }
        int sent = sendmmsg(fd, msgs, (unsigned)n, MSG_DONTWAIT);
        if (sent < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || done > 0)
                break;
            return PyErr_SetFromErrno(PyExc_OSError);
        }
        done += sent;
        if (sent < n)
            break;                     /* the kernel took fewer: it pushed back, or an error */
    }
    return PyLong_FromSsize_t(done);
}

static PyObject *sockaddr(PyObject *self, PyObject *args) {
    const char *host;
    int port;
    if (!PyArg_ParseTuple(args, "si", &host, &port))
        return NULL;
    if (port < 0 || port > 65535) {
        PyErr_SetString(PyExc_ValueError, "port out of range");
        return NULL;
    }
    struct sockaddr_in a4;
    memset(&a4, 0, sizeof a4);
    if (inet_pton(AF_INET, host, &a4.sin_addr) == 1) {
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)port);
        return PyBytes_FromStringAndSize((const char *)&a4, sizeof a4);
    }
    struct sockaddr_in6 a6;
    memset(&a6, 0, sizeof a6);
    if (inet_pton(AF_INET6, host, &a6.sin6_addr) == 1) {
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)port);
        return PyBytes_FromStringAndSize((const char *)&a6, sizeof a6);
    }
    PyErr_Format(PyExc_ValueError, "not a numeric IPv4 or IPv6 address: %s", host);
    return NULL;
}

static PyMethodDef methods[] = {
    {"recv_many", recv_many, METH_VARARGS, "recvmmsg: [(data, (host, port)), ...]"},
    {"send_many", send_many, METH_VARARGS, "sendmmsg: datagrams the kernel took"},
    {"sockaddr", sockaddr, METH_VARARGS, "the packed sockaddr of (host, port)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_mmsg", NULL, -1, methods};

PyMODINIT_FUNC PyInit__mmsg(void) { return PyModule_Create(&module); }
