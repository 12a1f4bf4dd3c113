package streamchaos;

import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.Driver;
import java.sql.DriverPropertyInfo;
import java.sql.SQLException;
import java.sql.SQLFeatureNotSupportedException;
import java.util.Properties;
import java.util.logging.Logger;
import org.apache.spark.TaskContext;

/**
 * The "sink-write" of Spark's JDBC writer, in its tasks: the job's JDBC driver (PostgreSQL's) behind a wrapper whose
 * connections report the phase once a task's transaction committed, its rows in the database and the task not yet
 * finished. A fault there (an executor killed) makes Spark run the task again, which writes the partition again:
 * the window where an append through JDBC is not idempotent. The harness names this class as the write's "driver"
 * option (chaos/jobs/databases.py) and the job's own driver, the controller, the incarnation and the batch as
 * connection properties, which it takes off before it connects; connections opened outside a task (the driver's
 * table creation) report nothing.
 */
public class BarrierJdbcDriver implements Driver {
    public static final String PREFIX = "streamchaos.";

    @Override
    public Connection connect(String url, Properties info) throws SQLException {
        Properties rest = new Properties();
        for (String key : info.stringPropertyNames()) {
            if (!key.startsWith(PREFIX)) {
                rest.setProperty(key, info.getProperty(key));
            }
        }
        Driver inner = inner(info.getProperty(PREFIX + "driver", "org.postgresql.Driver"));
        Connection connection = inner.connect(url, rest);
        String controller = info.getProperty(PREFIX + "controller", "");
        TaskContext task = TaskContext.get();
        if (connection == null || controller.isEmpty() || task == null) {
            return connection;
        }
        String incarnation = info.getProperty(PREFIX + "incarnation", "0");
        long batch = Long.parseLong(info.getProperty(PREFIX + "batch", "-1"));
        InvocationHandler reporting = (proxy, method, args) -> {
            Object result;
            try {
                result = method.invoke(connection, args);
            } catch (InvocationTargetException e) {
                throw e.getCause();
            }
            if (method.getName().equals("commit") && (args == null || args.length == 0)) {
                Barrier.report(controller, incarnation, batch, "sink-write", "\"partition\": " + task.partitionId()
                        + ", \"task_attempt\": " + task.attemptNumber() + ", \"committed\": true", "jdbc");
            }
            return result;
        };
        return (Connection) Proxy.newProxyInstance(Connection.class.getClassLoader(),
                new Class<?>[] {Connection.class}, reporting);
    }

    private static Driver inner(String name) throws SQLException {
        ClassLoader loader = Thread.currentThread().getContextClassLoader();
        try {
            return (Driver) Class.forName(name, true, loader != null ? loader : BarrierJdbcDriver.class.getClassLoader())
                    .getDeclaredConstructor().newInstance();
        } catch (ReflectiveOperationException e) {
            throw new SQLException("streamchaos: cannot load the job's JDBC driver " + name + ": " + e, e);
        }
    }

    /** Never chosen by URL: Spark's JDBC writer picks it by its class name (the "driver" option) only. */
    @Override
    public boolean acceptsURL(String url) {
        return false;
    }

    @Override
    public DriverPropertyInfo[] getPropertyInfo(String url, Properties info) {
        return new DriverPropertyInfo[0];
    }

    @Override
    public int getMajorVersion() {
        return 1;
    }

    @Override
    public int getMinorVersion() {
        return 0;
    }

    @Override
    public boolean jdbcCompliant() {
        return false;
    }

    @Override
    public Logger getParentLogger() throws SQLFeatureNotSupportedException {
        throw new SQLFeatureNotSupportedException();
    }
}
