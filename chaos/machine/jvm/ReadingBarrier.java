package streamchaos;

import org.apache.spark.TaskContext;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.SparkPlugin;

/**
 * The "reading" phase for sources of Spark's own (its Kafka source), where no Python runs (spark.plugins).
 *
 * Spark calls an executor plugin's onTaskStart in the task's own thread, its TaskContext set, before the task
 * reads anything. A task of a trial's query carries the driver's local properties: the harness sets
 * streamchaos.reading.controller (and .incarnation) on the thread that starts the query, Spark adds
 * streaming.sql.batchId for each micro-batch. Such a task reports "reading" of its batch and waits for the
 * harness, like the event-log source's reader does; every other task passes untouched. The first task of each
 * stage of a batch in this executor reports, the others pass: a sink that runs jobs of its own inside the batch
 * (Delta reads its log with 50 tasks) would otherwise wait for the harness once per task.
 */
public class ReadingBarrier implements SparkPlugin {
    private static final java.util.Set<String> REPORTED = java.util.concurrent.ConcurrentHashMap.newKeySet();

    @Override
    public DriverPlugin driverPlugin() {
        return null;
    }

    @Override
    public ExecutorPlugin executorPlugin() {
        return new ExecutorPlugin() {
            @Override
            public void onTaskStart() {
                TaskContext task = TaskContext.get();
                if (task == null) {
                    return;
                }
                String controller = task.getLocalProperty("streamchaos.reading.controller");
                String batch = task.getLocalProperty("streaming.sql.batchId");
                if (controller == null || controller.isEmpty() || batch == null) {
                    return;
                }
                String incarnation = task.getLocalProperty("streamchaos.reading.incarnation");
                if (!REPORTED.add(controller + "/" + incarnation + "/" + batch + "/" + task.stageId())) {
                    return;
                }
                Barrier.report(controller, incarnation == null ? "0" : incarnation, Long.parseLong(batch), "reading",
                        "\"partition\": " + task.partitionId() + ", \"stage\": " + task.stageId(), "task");
            }
        };
    }
}
