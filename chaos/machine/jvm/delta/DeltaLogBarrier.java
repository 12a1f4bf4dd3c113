package streamchaos;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import io.delta.storage.HDFSLogStore;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;

/**
 * "sink-write" for Delta's streaming sink: the batch's data files are written (txn.writeFiles' job is done) and
 * _delta_log/N.json is about to be written, so a fault there leaves files no commit names. Selected with
 * spark.delta.logStore.file.impl (SparkConf, at start); everything else is HDFSLogStore's, Delta's own default for
 * file: paths. Built apart from the other hooks, against Delta's jars (chaos/stream/sinks/delta.py). While it
 * waits, Delta holds the table's snapshot lock: nothing else in this driver reads the table meanwhile.
 */
public class DeltaLogBarrier extends HDFSLogStore {
    private static final String PREFIX = "spark.streamchaos.delta.";
    private static final Pattern COMMIT = Pattern.compile("\\d{20}\\.json");
    private static final Pattern EPOCH = Pattern.compile("\"epochId\":\"(\\d+)\"");
    private static final Pattern TXN = Pattern.compile("^\\{\"txn\":\\{.*\"version\":(\\d+)");

    public DeltaLogBarrier(Configuration hadoopConf) {  // public (Configuration): Delta's reflection needs it
        super(hadoopConf);
    }

    @Override
    public void write(Path path, Iterator<String> actions, Boolean overwrite, Configuration hadoopConf)
            throws IOException {
        Path log = path.getParent();
        if (log == null || !log.getName().equals("_delta_log") || !COMMIT.matcher(path.getName()).matches()) {
            super.write(path, actions, overwrite, hadoopConf);  // _last_checkpoint, v2 checkpoint json, ...
            return;
        }
        // Settings from the hadoopConf of this commit (newDeltaHadoopConf: the session's conf), not the
        // constructor's: Delta caches one LogStore per DeltaLog across queries and incarnations.
        String phases = "," + hadoopConf.get(PREFIX + "phases", "") + ",";
        String root = hadoopConf.get(PREFIX + "root", "");
        String table = log.getParent() == null ? "" : log.getParent().toUri().getPath();
        if (!phases.contains(",sink-write,") || (!root.isEmpty() && !table.equals(root.replaceAll("/+$", "")))) {
            super.write(path, actions, overwrite, hadoopConf);
            return;
        }
        List<String> lines = new ArrayList<>();  // one pass only: buffer, inspect, then delegate
        actions.forEachRemaining(lines::add);
        long batch = batchOf(lines);
        if (batch >= 0) {
            long version = Long.parseLong(path.getName().substring(0, 20));
            Barrier.report(hadoopConf.get(PREFIX + "controller", ""), hadoopConf.get(PREFIX + "incarnation", "0"),
                    batch, "sink-write", "\"before\": \"_delta_log/" + path.getName() + "\", \"version\": " + version,
                    "delta");
        }
        super.write(path, lines.iterator(), overwrite, hadoopConf);
    }

    /** The micro-batch a commit is for: commitInfo (first line) of a STREAMING UPDATE, else the txn action; -1. */
    static long batchOf(List<String> lines) {
        for (String line : lines) {
            if (line.startsWith("{\"commitInfo\":")) {
                if (!line.contains("\"operation\":\"STREAMING UPDATE\"")) {
                    return -1L;  // not DeltaSink's commit (CREATE TABLE, OPTIMIZE, a batch write, ...)
                }
                Matcher m = EPOCH.matcher(line);
                if (m.find()) {
                    return Long.parseLong(m.group(1));
                }
            }
        }
        for (String line : lines) {  // commitInfo disabled (spark.databricks.delta.commitInfo.enabled=false)
            Matcher m = TXN.matcher(line);
            if (m.find()) {
                return Long.parseLong(m.group(1));
            }
        }
        return -1L;
    }
}
