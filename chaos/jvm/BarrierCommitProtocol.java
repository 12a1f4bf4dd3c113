package streamchaos;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;

import org.apache.hadoop.mapreduce.JobContext;
import org.apache.spark.SparkEnv;
import org.apache.spark.internal.io.FileCommitProtocol.TaskCommitMessage;
import org.apache.spark.sql.execution.streaming.ManifestFileCommitProtocol;
import org.apache.spark.sql.execution.streaming.sinks.FileStreamSinkLog;
import scala.collection.immutable.Seq;

/**
 * The file sink's commit protocol with streamchaos phase barriers (spark.sql.streaming.commitProtocolClass).
 *
 * The file sink writes part files from the tasks, then (commitJob, on the driver) appends the batch's
 * entry to _spark_metadata/N, then Spark writes commits/N. No Python hook sees those steps, so this
 * class reports them to the harness's controller and waits for its answer, like the Python sinks do:
 * "sink-write" when every task's file is complete and the log entry is not yet written, "sink-done"
 * after the log entry. The controller's address comes from spark.streamchaos.controller.
 */
public class BarrierCommitProtocol extends ManifestFileCommitProtocol {
    private long batch = -1L;

    public BarrierCommitProtocol(String jobId, String path) {
        super(jobId, path);
    }

    @Override
    public void setupManifestOptions(FileStreamSinkLog fileLog, long batchId) {
        this.batch = batchId;
        super.setupManifestOptions(fileLog, batchId);
    }

    @Override
    public void commitJob(JobContext jobContext, Seq<TaskCommitMessage> taskCommits) {
        report("sink-write", "\"files\": " + taskCommits.size());
        super.commitJob(jobContext, taskCommits);
        report("sink-done", "\"log\": \"_spark_metadata/" + batch + "\"");
    }

    private void report(String phase, String detail) {
        String address = SparkEnv.get().conf().get("spark.streamchaos.controller", "");
        if (address.isEmpty() || batch < 0) {
            return;
        }
        int colon = address.lastIndexOf(':');
        long pid = ProcessHandle.current().pid();
        String incarnation = SparkEnv.get().conf().get("spark.streamchaos.incarnation", "0");
        String message = "{\"type\": \"phase\", \"batch\": " + batch + ", \"phase\": \"" + phase + "\", \"pid\": " + pid
                + ", \"detail\": {" + detail + ", \"incarnation\": " + incarnation + ", \"source\": \"file-sink\"}}\n";
        try (Socket socket = new Socket()) {
            socket.connect(new InetSocketAddress(address.substring(0, colon), Integer.parseInt(address.substring(colon + 1))), 30000);
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
