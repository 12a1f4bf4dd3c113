package streamchaos;

import java.io.FileOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Phase barriers for Spark's console sink, installed as the driver JVM's System.out.
 *
 * The console sink of a continuous query prints an epoch on the driver when the epoch commits:
 * a "Batch: N" header, then the whole table in one println; right after it, Spark writes commits/N.
 * That print is the sink's write, and no Python code runs anywhere near it. This stream passes every
 * line on to the original stdout (the driver log), copies it to a capture file the harness reads the
 * sink's output from, and reports "sink-write" after the header (rows not printed yet) and
 * "sink-done" after the table (printed, commits/N not yet written), waiting at each for the harness.
 */
public class ConsoleBarrier extends PrintStream {
    private static final Pattern HEADER = Pattern.compile("Batch: (\\d+)");

    private final PrintStream original;
    private final PrintStream capture;
    private final String controller;
    private final String incarnation;
    private long batch = -1L;

    private ConsoleBarrier(PrintStream original, PrintStream capture, String controller, String incarnation) {
        super(original, true);
        this.original = original;
        this.capture = capture;
        this.controller = controller;
        this.incarnation = incarnation;
    }

    /** Replace System.out (once per JVM; a second call re-targets the capture file). */
    public static synchronized void install(String capturePath, String controller, String incarnation)
            throws IOException {
        PrintStream current = System.out;
        if (current instanceof ConsoleBarrier) {
            current = ((ConsoleBarrier) current).original;
        }
        PrintStream capture = new PrintStream(new FileOutputStream(capturePath, true), true, StandardCharsets.UTF_8);
        System.setOut(new ConsoleBarrier(current, capture, controller, incarnation));
    }

    @Override
    public void println(String text) {
        line(String.valueOf(text));
    }

    @Override
    public void println(Object value) {
        line(String.valueOf(value));
    }

    private synchronized void line(String text) {
        original.println(text);
        capture.println(text);
        capture.flush();
        Matcher header = HEADER.matcher(text.trim());
        if (header.matches()) {
            batch = Long.parseLong(header.group(1));
            Barrier.report(controller, incarnation, batch, "sink-write", "", "console-sink");
        } else if (batch >= 0 && text.startsWith("+")) {
            long rows = text.lines().filter(l -> l.startsWith("|")).count() - 1;  // minus the column header
            Barrier.report(controller, incarnation, batch, "sink-done", "\"rows\": " + Math.max(rows, 0), "console-sink");
            batch = -1L;
        }
    }
}
