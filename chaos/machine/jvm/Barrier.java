package streamchaos;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;

/**
 * The JVM side of the harness's phase barriers (chaos/nemesis/barrier.py speaks the same one-line protocol):
 * send {"type": "phase", ...} to the controller and block until it answers, i.e. until every fault
 * armed for this (batch, phase) has fired. A JVM hook calls this exactly where no Python code runs.
 */
public final class Barrier {
    private Barrier() {
    }

    /** Report ``phase`` of ``batch``; ``detail`` is a JSON fragment ("\"rows\": 3") or empty. */
    public static void report(String address, String incarnation, long batch, String phase, String detail,
                              String source) {
        if (address == null || address.isEmpty() || batch < 0) {
            return;
        }
        int colon = address.lastIndexOf(':');
        long pid = ProcessHandle.current().pid();
        String extra = detail.isEmpty() ? "" : detail + ", ";
        String message = "{\"type\": \"phase\", \"batch\": " + batch + ", \"phase\": \"" + phase + "\", \"pid\": " + pid
                + ", \"detail\": {" + extra + "\"incarnation\": " + incarnation + ", \"source\": \"" + source + "\"}}\n";
        try (Socket socket = new Socket()) {
            socket.connect(new InetSocketAddress(address.substring(0, colon),
                    Integer.parseInt(address.substring(colon + 1))), 30000);
            socket.setSoTimeout(900000);
            OutputStream out = socket.getOutputStream();
            out.write(message.getBytes(StandardCharsets.UTF_8));
            out.flush();
            new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8)).readLine();
        } catch (java.io.IOException e) {
            throw new RuntimeException("streamchaos: phase barrier " + phase + " of batch " + batch + " failed: " + e, e);
        }
    }
}
